package logging

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// apiServer answers every request with a Namespace and a deprecation warning, which
// client-go logs through klog.
func apiServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Warning", `299 - "v1 Widget is deprecated"`)
		_, _ = io.WriteString(w, `{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"x"}}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// captureStderr runs fn with os.Stderr redirected and returns what was written there.
func captureStderr(t *testing.T, fn func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = w
	done := make(chan []byte)
	go func() { b, _ := io.ReadAll(r); done <- b }()
	defer func() {
		os.Stderr = saved
	}()
	fn()
	klog.Flush()
	os.Stderr = saved
	_ = w.Close()
	return string(<-done)
}

func records(t *testing.T, out string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line is not JSON: %q: %v", sc.Text(), err)
		}
		recs = append(recs, m)
	}
	return recs
}

func TestKlogFromClientGoGoesThroughTheLogger(t *testing.T) {
	srv := apiServer(t)
	tests := []struct {
		v            int
		wantRequests bool // client-go logs each request at V(6)
		wantDebug    bool // slog.Debug is level -4
	}{
		{v: 0},
		{v: 4, wantDebug: true},
		{v: 6, wantRequests: true, wantDebug: true},
	}
	for _, tt := range tests {
		var logBuf bytes.Buffer
		o := Options{Verbosity: tt.v, Format: "json"}
		stderr := captureStderr(t, func() {
			l, err := o.Setup(&logBuf)
			if err != nil {
				t.Fatal(err)
			}
			l.Debug("debug detail")
			cs := kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL})
			if _, err := cs.CoreV1().Namespaces().Get(context.Background(), "x", metav1.GetOptions{}); err != nil {
				t.Fatal(err)
			}
		})
		if stderr != "" {
			t.Errorf("-v %d: klog wrote to stderr directly: %q", tt.v, stderr)
		}
		var warning, request, debug bool
		for _, r := range records(t, logBuf.String()) {
			msg, _ := r["msg"].(string)
			switch {
			case strings.Contains(msg, "v1 Widget is deprecated"):
				warning = r["level"] == "INFO"
			case strings.Contains(msg, "Response") || r["verb"] == "GET":
				request = true
			case msg == "debug detail":
				debug = true
			}
		}
		if !warning {
			t.Errorf("-v %d: client-go's warning is not an INFO record of the JSON log:\n%s", tt.v, logBuf.String())
		}
		if request != tt.wantRequests || debug != tt.wantDebug {
			t.Errorf("-v %d: request logged %v (want %v), debug logged %v (want %v):\n%s", tt.v, request, tt.wantRequests, debug, tt.wantDebug, logBuf.String())
		}
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		o       Options
		wantErr string
	}{
		{Options{Format: "text"}, ""},
		{Options{Format: "json", Verbosity: 9}, ""},
		{Options{Format: "xml"}, `--log-format "xml": want text or json`},
		{Options{Format: "text", Verbosity: -1}, "-v -1"},
	}
	for _, tt := range tests {
		err := tt.o.Validate()
		if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%+v: error %v, want %q", tt.o, err, tt.wantErr)
		}
	}
}

func TestTextFormatAndContext(t *testing.T) {
	var b bytes.Buffer
	l, err := (&Options{Format: "text"}).New(&b)
	if err != nil {
		t.Fatal(err)
	}
	FromContext(NewContext(context.Background(), l)).Info("hello", "k", "v")
	if got := b.String(); !strings.Contains(got, "level=INFO msg=hello k=v") {
		t.Errorf("text log = %q", got)
	}
	FromContext(context.Background()).Info("discarded") // no logger: no panic, no output
}
