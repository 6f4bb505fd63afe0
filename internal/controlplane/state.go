package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/nodejoin/nodejoin/internal/atomicfile"
	"github.com/nodejoin/nodejoin/internal/netns"
	"github.com/nodejoin/nodejoin/internal/process"
)

// StateFile is the name of the file in the state directory that records what a running
// cluster consists of, so that `nodejoin down` can stop it from another process.
const StateFile = "cluster.json"

// ErrNoCluster reports that a state directory holds no cluster.
var ErrNoCluster = errors.New("no cluster")

// State is what cluster.json records.
type State struct {
	Name      string  `json:"name"`
	Network   Network `json:"network"`
	Namespace string  `json:"namespace,omitempty"`
	// Endpoint is the API server URL as the host sees it.
	Endpoint   string `json:"endpoint,omitempty"`
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Owner is the process that runs the cluster (it forwards the API port and stops
	// the daemons on SIGTERM).
	Owner process.Identity `json:"owner"`
	// Daemons are the cluster's child processes by name.
	Daemons map[string]process.Identity `json:"daemons,omitempty"`
	// Components are the control plane's daemons in start order, with where to ask
	// for their health.
	Components []Component `json:"components,omitempty"`
	// Ready is set once the API server answered /readyz.
	Ready bool `json:"ready"`
}

// Component is what the state file records of one control-plane daemon.
type Component struct {
	Name string `json:"name"`
	// Health is the HTTPS URL that answers with a body containing Want while the
	// daemon is healthy; in namespace mode it is reached inside the cluster namespace.
	Health string `json:"health"`
	Want   string `json:"want"`
	Log    string `json:"log"`
	// Restarts counts how often the cluster's owner restarted the daemon after it
	// exited (kube-controller-manager and kube-scheduler are restarted; etcd and
	// kube-apiserver are not).
	Restarts int `json:"restarts,omitempty"`
}

// ReadState reads the state file of the cluster in dir.
func ReadState(dir string) (*State, error) {
	data, err := os.ReadFile(filepath.Join(dir, StateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s", ErrNoCluster, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("reading cluster state: %w", err)
	}
	var s State
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", filepath.Join(dir, StateFile), err)
	}
	return &s, nil
}

func writeState(dir string, s *State) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding cluster state: %w", err)
	}
	return atomicfile.WriteFile(filepath.Join(dir, StateFile), append(data, '\n'), 0o600)
}

// EnsureNoCluster returns nil when dir holds no cluster, and otherwise an error saying
// whether the cluster there runs or crashed, and what to do.
func EnsureNoCluster(dir string) error {
	s, err := ReadState(dir)
	switch {
	case errors.Is(err, ErrNoCluster):
		return nil
	case err != nil:
		return err
	case s.Running():
		return fmt.Errorf("cluster %s is running already (state in %s); use it (`nodejoin kubeconfig --name %s`) or stop it with `nodejoin down --name %s`", s.Name, dir, s.Name, s.Name)
	default:
		return fmt.Errorf("cluster %s left state behind in %s; clean it up with `nodejoin down --name %s`", s.Name, dir, s.Name)
	}
}

// Running reports whether the cluster's owner process is alive.
func (s *State) Running() bool { return s.Owner.Alive() }

// Destroy stops whatever the cluster in dir left running — first its owner, which stops
// its daemons in order, then any daemon that outlived it — deletes its network
// namespace and removes dir. It works on a half-started or crashed cluster too; a dir
// without a state file is removed as it is.
func Destroy(ctx context.Context, dir string) error {
	s, err := ReadState(dir)
	switch {
	case errors.Is(err, ErrNoCluster):
	case err != nil:
		return err
	default:
		if s.Owner.PID != os.Getpid() {
			process.Terminate(s.Owner, 30*time.Second)
		}
		for _, id := range s.Daemons {
			process.Terminate(id, 10*time.Second)
		}
		if s.Namespace != "" {
			if err := netns.Delete(ctx, s.Namespace); err != nil {
				return fmt.Errorf("deleting network namespace of cluster %s: %w", s.Name, err)
			}
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing state directory: %w", err)
	}
	return nil
}

// namespaceName is the network namespace of the cluster named name.
func namespaceName(name string) string { return "nodejoin-" + name }

// LeftoverNamespace returns the name of the cluster's network namespace when it exists
// (after a crash before its state was written), or "".
func LeftoverNamespace(name string) string {
	ns := netns.NS{Name: namespaceName(name)}
	if ns.Exists() {
		return ns.Name
	}
	return ""
}

// DeleteLeftoverNamespace deletes the cluster's network namespace if it still exists
// and no process runs in it. A namespace in use belongs to a cluster this state
// directory does not know of (one started with another XDG_STATE_HOME, say): it is
// left alone, with an error naming the processes.
func DeleteLeftoverNamespace(ctx context.Context, name string) error {
	if LeftoverNamespace(name) == "" {
		return nil
	}
	ns := netns.NS{Name: namespaceName(name)}
	users, err := ns.Users()
	if err != nil {
		return err
	}
	if len(users) > 0 {
		return fmt.Errorf("network namespace %s is still used by processes %v, which this state directory does not record (a cluster started with another XDG_STATE_HOME?); left it alone", ns.Name, users)
	}
	return netns.Delete(ctx, ns.Name)
}
