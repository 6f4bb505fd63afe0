package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nodejoin/nodejoin/internal/httpserver"
	"github.com/nodejoin/nodejoin/internal/sandbox/progress"
)

// controlSocket is the Unix socket, in the state directory, where the process that runs
// a cluster takes requests from other processes (AddNodesTo). Only root, or the user
// who started the cluster, can reach it: the directory is 0700.
const controlSocket = "control.sock"

// addRequest asks the running cluster for more nodes.
type addRequest struct {
	Nodes NodeOptions `json:"nodes"`
}

// addMessage is one line of the streamed answer: an event, or at the end the nodes or
// the error.
type addMessage struct {
	Event *Event `json:"event,omitempty"`
	Nodes []Node `json:"nodes,omitempty"`
	Error string `json:"error,omitempty"`
	// Option is set when the error is an invalid option.
	Option *OptionError `json:"option,omitempty"`
	Done   bool         `json:"done,omitempty"`
}

// serveControl answers AddNodesTo with add until ctx ends.
func serveControl(ctx context.Context, stateDir string, log *slog.Logger, add func(context.Context, NodeOptions, Progress) ([]Node, error)) error {
	path := filepath.Join(stateDir, controlSocket)
	if len(path) >= 108 {
		return fmt.Errorf("control socket path %s is longer than a Unix socket allows (107 bytes): use a shorter XDG_STATE_HOME", path)
	}
	_ = os.Remove(path)
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "unix", path)
	if err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/nodes", func(rw http.ResponseWriter, r *http.Request) {
		var req addRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil {
			http.Error(rw, "decoding the request: "+err.Error(), http.StatusBadRequest)
			return
		}
		rw.Header().Set("Content-Type", "application/jsonl")
		out := &lineWriter{w: rw}
		nodes, err := add(r.Context(), req.Nodes, func(e Event) { out.send(addMessage{Event: &e}) })
		if err != nil {
			m := addMessage{Error: err.Error()}
			errors.As(err, &m.Option)
			out.send(m)
			return
		}
		out.send(addMessage{Nodes: nodes, Done: true})
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := httpserver.Serve(ctx, srv, l); err != nil {
			log.Error("control socket", "err", err)
		}
	}()
	return nil
}

// lineWriter sends JSON lines and flushes each.
type lineWriter struct {
	mu sync.Mutex
	w  http.ResponseWriter
}

func (f *lineWriter) send(m addMessage) {
	data, _ := json.Marshal(m)
	f.mu.Lock()
	defer f.mu.Unlock()
	_, _ = f.w.Write(append(data, '\n'))
	if fl, ok := f.w.(http.Flusher); ok {
		fl.Flush()
	}
}

// AddNodesTo asks the process that runs the cluster name to launch nodes, relays its
// progress, and returns the nodes once Ready.
func AddNodesTo(ctx context.Context, name string, o NodeOptions, onProgress Progress) ([]Node, error) {
	dir, _, err := running(name)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, controlSocket)
	body, err := json.Marshal(addRequest{Nodes: o})
	if err != nil {
		return nil, err
	}
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://nodejoin/v1/nodes", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reaching the cluster's process through %s: %w", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("the cluster's process refused the request: %s", strings.TrimSpace(string(msg)))
	}
	rep := progress.NewReporter(onProgress)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		var m addMessage
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			return nil, fmt.Errorf("decoding the cluster's answer: %w", err)
		}
		switch {
		case m.Event != nil:
			rep.Report(*m.Event)
		case m.Option != nil:
			return nil, m.Option
		case m.Error != "":
			return nil, errors.New(m.Error)
		case m.Done:
			return m.Nodes, nil
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return nil, errors.New("the cluster's process ended the answer early; see its log, logs/nodejoin.log")
}
