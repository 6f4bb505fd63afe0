package nodejoin

import (
	"bufio"
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

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/nodejoin/nodejoin/internal/httpserver"
)

// controlSocket is the Unix socket, in the state directory, where the process that runs
// a cluster takes requests from other nodejoin commands (`nodejoin node add`). Only
// root, or the user who started the cluster, can reach it: the directory is 0700.
const controlSocket = "control.sock"

// addRequest asks the running cluster for more nodes.
type addRequest struct {
	Nodes nodeOptions `json:"nodes"`
}

// Lines of the streamed answer that end it.
const (
	doneMarker  = "nodejoin: done"
	errorMarker = "nodejoin: error: "
)

// serveControl answers `nodejoin node add` until ctx ends.
func (s *session) serveControl(ctx context.Context, defaults nodeOptions, binDir string, log *slog.Logger) error {
	path := filepath.Join(s.c.StateDir(), controlSocket)
	if len(path) >= 108 {
		return fmt.Errorf("control socket path %s is longer than a Unix socket allows (107 bytes): use a shorter XDG_STATE_HOME", path)
	}
	_ = os.Remove(path)
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "unix", path)
	if err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	var mu sync.Mutex // one request at a time: instances are launched in order
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/nodes", func(rw http.ResponseWriter, r *http.Request) {
		var req addRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil {
			http.Error(rw, "decoding the request: "+err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		out := &flushWriter{w: rw}
		sum, err := s.addNodes(r.Context(), req.Nodes, defaults, binDir, out, log)
		if err != nil {
			fmt.Fprintf(out, "%s%s\n", errorMarker, strings.ReplaceAll(err.Error(), "\n", "\n"+errorMarker))
			return
		}
		data, _ := json.Marshal(sum)
		fmt.Fprintf(out, "%s %s\n", doneMarker, data)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := httpserver.Serve(ctx, srv, l); err != nil {
			log.Error("control socket", "err", err)
		}
	}()
	return nil
}

type flushWriter struct {
	mu sync.Mutex
	w  http.ResponseWriter
}

func (f *flushWriter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.w.Write(p)
	if fl, ok := f.w.(http.Flusher); ok {
		fl.Flush()
	}
	return n, err
}

// addNodes launches more instances into the running cluster, with up's settings for
// what the request leaves out.
func (s *session) addNodes(ctx context.Context, o, defaults nodeOptions, binDir string, progress io.Writer, log *slog.Logger) ([]nodeSummary, error) {
	if o.Identity == "" {
		o.Identity = defaults.Identity
	}
	if o.Kubelet == "" {
		o.Kubelet = defaults.Kubelet
	}
	if o.InstanceType == "" {
		o.InstanceType = defaults.InstanceType
	}
	if o.AMIFamily == "" {
		o.AMIFamily = defaults.AMIFamily
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	w := s.w
	s.mu.Unlock()
	if w == nil {
		var err error
		if w, err = startWorkers(ctx, s.c, s.cp, defaults, binDir, progress, log); err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.w = w
		s.mu.Unlock()
	}
	if o.Identity != string(w.identity) {
		return nil, fmt.Errorf("--identity %s: this cluster's nodes use %s (set by `nodejoin up --identity`)", o.Identity, w.identity)
	}
	if o.Kubelet != "" && o.Kubelet != string(w.kubelet) {
		return nil, fmt.Errorf("--kubelet %s: this cluster runs %s kubelets", o.Kubelet, w.kubelet)
	}
	client, err := kubernetes.NewForConfig(s.c.RESTConfig())
	if err != nil {
		return nil, err
	}
	return w.run(ctx, client, o, s.cp, s.c.StateDir(), progress)
}

func nodeCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "node", Short: "Add nodes to a running cluster"}
	cmd.AddCommand(nodeAddCommand())
	return cmd
}

func nodeAddCommand() *cobra.Command {
	var name string
	o := nodeOptions{}
	cmd := &cobra.Command{
		Use:   "add",
		Short: "Launch more local instances into a running cluster and wait until they are Ready",
		Long: "add asks the process that runs the cluster (`nodejoin up`) to launch instances, shows their\n" +
			"join step by step, and fails naming the node and the step when one does not join.\n\n" +
			"--claim-address and --credentials-of make a node misbehave on purpose, to watch the control\n" +
			"plane refuse it: --claim-address NODE makes the kubelet report another node's address and ask\n" +
			"for a serving certificate with it, and --credentials-of NODE serves another node's\n" +
			"instance-role credentials from this instance's metadata endpoint. `nodejoin diagnose node`\n" +
			"then explains the refusal.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, _, err := runningCluster(name)
			if err != nil {
				return err
			}
			return addViaSocket(cmd.Context(), filepath.Join(dir, controlSocket), o, cmd.ErrOrStderr(), cmd.OutOrStdout())
		},
	}
	nameFlag(cmd, &name)
	f := cmd.Flags()
	f.IntVar(&o.Count, "count", 1, "how many instances to launch")
	f.StringVar(&o.InstanceType, "instance-type", "", "EC2 instance type (default: up's)")
	f.StringVar(&o.AMIFamily, "ami-family", "", "user-data format (default: up's)")
	f.StringVar(&o.Kubelet, "kubelet", "", "real or sim (default: the cluster's)")
	f.DurationVar(&o.Timeout, "timeout", 0, "how long the nodes may take to become Ready (default 5m)")
	f.StringArrayVar(&o.KubeletFlags, "kubelet-arg", nil, "extra kubelet flag, through a local NodeConfig (repeatable)")
	f.StringVar(&o.CredentialsOf, "credentials-of", "", "node name or instance ID whose role credentials this instance's IMDS serves (a stolen-credentials test)")
	f.StringVar(&o.ClaimAddress, "claim-address", "", "node name or address the kubelet claims as its own node IP (a foreign-address test)")
	return cmd
}

// addViaSocket posts the request and relays the progress; the summary goes to stdout.
func addViaSocket(ctx context.Context, path string, o nodeOptions, progress, stdout io.Writer) error {
	body, err := json.Marshal(addRequest{Nodes: o})
	if err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://nodejoin/v1/nodes", strings.NewReader(string(body)))
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("reaching the cluster's process through %s: %w", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("the cluster's process refused the request: %s", strings.TrimSpace(string(msg)))
	}
	sc := bufio.NewScanner(resp.Body)
	var errs []string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, doneMarker):
			var sum []nodeSummary
			if err := json.Unmarshal([]byte(strings.TrimSpace(strings.TrimPrefix(line, doneMarker))), &sum); err != nil {
				return fmt.Errorf("decoding the summary: %w", err)
			}
			printSummary(stdout, sum)
			return nil
		case strings.HasPrefix(line, errorMarker):
			errs = append(errs, strings.TrimPrefix(line, errorMarker))
		default:
			fmt.Fprintln(progress, line)
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "\n"))
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return errors.New("the cluster's process ended the answer early; see its log, logs/nodejoin.log")
}
