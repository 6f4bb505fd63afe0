package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/nodejoin/nodejoin/internal/controlplane"
	"github.com/nodejoin/nodejoin/internal/sandbox/instance"
)

// ExportedFile is a file ExportLogs wrote.
type ExportedFile struct {
	// Path is relative to the export directory.
	Path string `json:"path"`
	// Source is the file it copies.
	Source string `json:"source"`
	Bytes  int64  `json:"bytes"`
}

// Exported says what ExportLogs wrote.
type Exported struct {
	Cluster string         `json:"cluster"`
	Dir     string         `json:"dir"`
	Files   []ExportedFile `json:"files"`
}

// ControlPlaneLogDir is the subdirectory of an export that holds the logs of the
// control plane's daemons, nodejoin-controller and the process that runs the cluster.
const ControlPlaneLogDir = "control-plane"

// ExportLogs copies the logs of the cluster name into dir: the control plane's daemons'
// (etcd, kube-apiserver, kube-controller-manager, kube-scheduler), nodejoin-controller's
// and the cluster process's into dir/control-plane, and each node's nodeadm, kubelet and
// containerd logs and instance record into dir/NODE. The cluster need not be running; its state directory must exist.
func ExportLogs(name, dir string) (Exported, error) {
	ex := Exported{Cluster: name, Dir: dir, Files: []ExportedFile{}}
	state, err := StateDir(name)
	if err != nil {
		return ex, err
	}
	if _, err := controlplane.ReadState(state); errors.Is(err, controlplane.ErrNoCluster) {
		return ex, fmt.Errorf("no cluster named %s (nothing in %s); `nodejoin get clusters` lists them", name, state)
	}
	type copyJob struct{ src, dst string }
	var jobs []copyJob
	logDir := filepath.Join(state, "logs")
	entries, err := os.ReadDir(logDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return ex, fmt.Errorf("reading %s: %w", logDir, err)
	}
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".log") {
			jobs = append(jobs, copyJob{filepath.Join(logDir, e.Name()), filepath.Join(ControlPlaneLogDir, e.Name())})
		}
	}
	recs, err := instance.ReadRecords(filepath.Join(state, "instances"))
	if err != nil {
		return ex, err
	}
	for _, r := range recs {
		node := r.NodeName
		jobs = append(jobs,
			copyJob{filepath.Join(r.Dir, instance.RecordFile), filepath.Join(node, instance.RecordFile)},
			copyJob{filepath.Join(r.Dir, instance.NodeadmLog), filepath.Join(node, "nodeadm.log")})
		if r.Kubelet == instance.KubeletReal {
			jobs = append(jobs,
				copyJob{filepath.Join(r.Root, instance.KubeletLog), filepath.Join(node, "kubelet.log")},
				copyJob{filepath.Join(r.Root, instance.ContainerdLog), filepath.Join(node, "containerd.log")})
		} else {
			jobs = append(jobs, copyJob{filepath.Join(logDir, "kubeletsim", node+".log"), filepath.Join(node, "kubelet.log")})
		}
	}
	for _, j := range jobs {
		n, err := copyFile(j.src, filepath.Join(dir, j.dst))
		if errors.Is(err, os.ErrNotExist) {
			continue // a daemon that never ran, or a simulated kubelet's nodeadm log
		}
		if err != nil {
			return ex, err
		}
		ex.Files = append(ex.Files, ExportedFile{Path: j.dst, Source: j.src, Bytes: n})
	}
	sort.Slice(ex.Files, func(i, k int) bool { return ex.Files[i].Path < ex.Files[k].Path })
	return ex, nil
}

// copyFile copies src to dst, creating dst's directory; it returns the bytes copied.
func copyFile(src, dst string) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer func() { _ = in.Close() }()
	if err := os.MkdirAll(filepath.Dir(dst), 0o750); err != nil {
		return 0, fmt.Errorf("creating %s: %w", filepath.Dir(dst), err)
	}
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, fmt.Errorf("creating %s: %w", dst, err)
	}
	n, err := io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return 0, fmt.Errorf("copying %s to %s: %w", src, dst, err)
	}
	return n, nil
}
