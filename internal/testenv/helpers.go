package testenv

import (
	"bytes"
	"io"
	"net/http"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// SyncBuffer is a bytes.Buffer that goroutines may write to while a test reads it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// InMemoryBodies hands net/http request bodies that it knows are in memory, so that
// it writes each request in one piece. Given the SDK's own body wrapper, net/http
// flushes the headers, streams the body and then reads the wrapper once more for
// trailing bytes; by then the SDK may have its response and have closed the wrapper,
// and the transport, taking that for a write error, closes the connection under the
// response being read ("use of closed network connection", aws-sdk-go-v2#2737). The
// SDK's retries hide that; single-attempt tests that count requests would not.
type InMemoryBodies struct{ Client aws.HTTPClient }

// Do implements aws.HTTPClient.
func (c InMemoryBodies) Do(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Body != http.NoBody {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r = r.Clone(r.Context())
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	return c.Client.Do(r)
}
