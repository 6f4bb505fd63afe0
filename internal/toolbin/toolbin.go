// Package toolbin finds the pinned Kubernetes and etcd binaries that `make tools` builds
// into the repository's bin/ directory.
package toolbin

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// EnvDir names the environment variable that overrides where binaries are looked up.
const EnvDir = "NODEJOIN_BIN_DIR"

// ErrMissing reports that a required binary was not found.
var ErrMissing = errors.New("binary not found")

// Names of the binaries nodejoin runs.
const (
	KubeAPIServer         = "kube-apiserver"
	Kubelet               = "kubelet"
	KubeControllerManager = "kube-controller-manager"
	KubeScheduler         = "kube-scheduler"
	Kubectl               = "kubectl"
	Etcd                  = "etcd"
	// Helm installs nodejoin-controller's chart on a control-plane node.
	Helm = "helm"
	// Nodeadm is built from this module (`make build`).
	Nodeadm = "nodeadm"
)

// Dir returns the directory to take binaries from: $NODEJOIN_BIN_DIR when set, else the
// directory of the running executable (bin/nodejoin sits beside bin/kube-apiserver),
// else the bin/ directory of the source tree that contains the working directory.
func Dir() string {
	if d := os.Getenv(EnvDir); d != "" {
		return d
	}
	if exe, err := os.Executable(); err == nil {
		d := filepath.Dir(exe)
		if _, err := os.Stat(filepath.Join(d, KubeAPIServer)); err == nil {
			return d
		}
	}
	if root, err := RepoRoot(); err == nil {
		return filepath.Join(root, "bin")
	}
	return ""
}

// RepoRoot walks up from the working directory to the nodejoin source tree's root.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "hack", "build-tools.sh")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the nodejoin source tree")
		}
		dir = parent
	}
}

// Find returns the path of the named binary in dir, or in PATH when dir lacks it.
func Find(dir, name string) (string, error) {
	if dir != "" {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	where := dir
	if where == "" {
		where = "(no bin directory)"
	}
	return "", fmt.Errorf("%w: %s is neither in %s nor in PATH; build the pinned binaries with `make tools` or point %s at them", ErrMissing, name, where, EnvDir)
}
