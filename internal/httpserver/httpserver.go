// Package httpserver serves an http.Server until its context ends, then shuts it down
// gracefully; the webhook, the metrics endpoint and the local cloud's emulators use it.
package httpserver

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// Serve serves srv on l — over TLS when srv.TLSConfig holds certificates — until ctx
// ends, then shuts it down, giving requests in flight five seconds to finish.
func Serve(ctx context.Context, srv *http.Server, l net.Listener) error {
	errc := make(chan error, 1)
	go func() {
		if srv.TLSConfig != nil && len(srv.TLSConfig.Certificates) > 0 {
			errc <- srv.ServeTLS(l, "", "")
		} else {
			errc <- srv.Serve(l)
		}
	}()
	select {
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shutdown)
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}
