package netns

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
)

// Forward accepts connections on l, which listens in the host's namespace, and relays
// each to target inside the namespace. It returns when ctx is done or l fails, after
// closing l and every relayed connection.
func (n NS) Forward(ctx context.Context, l net.Listener, target string, log *slog.Logger) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-ctx.Done()
		_ = l.Close()
	}()
	for {
		conn, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.relay(ctx, conn, target, log)
		}()
	}
}

func (n NS) relay(ctx context.Context, client net.Conn, target string, log *slog.Logger) {
	defer func() { _ = client.Close() }()
	upstream, err := n.DialContext(ctx, "tcp", target)
	if err != nil {
		log.Warn("forwarding connection failed", "namespace", n.Name, "target", target, "err", err)
		return
	}
	defer func() { _ = upstream.Close() }()
	stop := context.AfterFunc(ctx, func() {
		_ = client.Close()
		_ = upstream.Close()
	})
	defer stop()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, err := io.Copy(dst, src)
		if err != nil && !errors.Is(err, net.ErrClosed) {
			log.Debug("relay ended", "err", err)
		}
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(upstream, client)
	go pipe(client, upstream)
	<-done
	<-done
}
