package instance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/nodejoin/nodejoin/internal/atomicfile"
	"github.com/nodejoin/nodejoin/internal/process"
)

// ImageNamespace is the containerd namespace the kubelet's images live in.
const ImageNamespace = "k8s.io"

// ContainerdSocket is the node's own containerd socket, under its root (as nodeadm
// writes containerd's config for a node with a root).
const ContainerdSocket = "run/containerd/containerd.sock"

// Containerd is a containerd started on its own, such as the one that imports a node's
// images before the node's own containerd and kubelet start.
type Containerd struct {
	Socket string
	proc   *process.Process
}

// StartContainerd starts containerd (the binary at path) with its content and
// snapshots under root, its state and socket under state, and its CRI plugin off (it
// only stores images), and waits until it answers.
func StartContainerd(ctx context.Context, path, root, state, logFile string) (*Containerd, error) {
	if err := os.MkdirAll(state, 0o700); err != nil {
		return nil, err
	}
	sock := filepath.Join(state, "containerd.sock")
	cfg := fmt.Sprintf("version = 2\nroot = %q\nstate = %q\ndisabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n\n[grpc]\n  address = %q\n\n"+
		"[plugins.\"io.containerd.internal.v1.opt\"]\n  path = %q\n", root, state, sock, filepath.Join(state, "opt"))
	cfgPath := filepath.Join(state, "config.toml")
	if err := atomicfile.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(logFile), 0o750); err != nil {
		return nil, err
	}
	p, err := process.Start(process.Spec{Name: "containerd (image import)", Argv: []string{path, "--config", cfgPath}, LogFile: logFile})
	if err != nil {
		return nil, err
	}
	c := &Containerd{Socket: sock, proc: p}
	deadline := time.Now().Add(60 * time.Second)
	for {
		// ctr waits long for a socket that is not there yet: ask only once it is.
		if _, err := os.Stat(sock); err == nil {
			if _, err := ctr(ctx, sock, "version"); err == nil {
				return c, nil
			}
		}
		select {
		case <-p.Done():
			return nil, fmt.Errorf("containerd for the image import exited: %w: %s", p.Err(), p.LogTail(5))
		case <-ctx.Done():
			p.Stop(5 * time.Second)
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.Stop(5 * time.Second)
			return nil, fmt.Errorf("containerd for the image import did not answer on %s within 60s (log: %s)", sock, logFile)
		}
	}
}

// Stop stops containerd and waits for it.
func (c *Containerd) Stop() { c.proc.Stop(15 * time.Second) }

// ctr runs ctr against the containerd at sock, in the kubelet's namespace.
func ctr(ctx context.Context, sock string, args ...string) ([]byte, error) {
	argv := append([]string{"--address", sock, "--namespace", ImageNamespace}, args...)
	cmd := exec.CommandContext(ctx, "ctr", argv...) //nolint:gosec // G702: the socket and arguments are the sandbox's own, never a request's.
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errOut.String())
		if msg == "" {
			msg = strings.TrimSpace(out.String())
		}
		return out.Bytes(), fmt.Errorf("ctr %s: %w: %s", strings.Join(args[:min(2, len(args))], " "), err, msg)
	}
	return out.Bytes(), nil
}

// ImportArchive imports a docker-save or OCI image archive into the containerd at sock,
// every platform, unpacked for the default snapshotter, as the kubelet's images.
func ImportArchive(ctx context.Context, sock, archive string) error {
	if _, err := os.Stat(archive); err != nil { //nolint:gosec // G703: an archive path the sandbox or its operator gives.
		return fmt.Errorf("image archive: %w", err)
	}
	if _, err := ctr(ctx, sock, "images", "import", "--all-platforms", "--digests", archive); err != nil {
		return fmt.Errorf("importing image archive %s: %w", archive, err)
	}
	return nil
}

// Image is an image a containerd holds.
type Image struct {
	Name   string `json:"name"`
	Digest string `json:"digest"`
	// Size is ctr's human-readable size of the image's content, such as "26.2 MiB".
	Size string `json:"size"`
}

// ListImages lists the named images of the containerd at sock, by name: the ones a pod
// can use. The entries that name an image only by its digest are left out.
func ListImages(ctx context.Context, sock string) ([]Image, error) {
	out, err := ctr(ctx, sock, "images", "ls")
	if err != nil {
		return nil, err
	}
	return parseImageList(string(out))
}

// parseImageList reads `ctr images ls` output: REF TYPE DIGEST SIZE PLATFORMS LABELS,
// where SIZE is a number and a unit.
func parseImageList(out string) ([]Image, error) {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "REF") {
		if strings.TrimSpace(out) == "" {
			return nil, nil
		}
		return nil, errors.New("unexpected `ctr images ls` output: no REF header")
	}
	var imgs []Image
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < 5 {
			return nil, fmt.Errorf("unexpected `ctr images ls` line %q", l)
		}
		if strings.HasPrefix(f[0], "sha256:") || strings.Contains(f[0], "@") {
			continue
		}
		imgs = append(imgs, Image{Name: f[0], Digest: f[2], Size: f[3] + " " + f[4]})
	}
	sort.Slice(imgs, func(i, j int) bool { return imgs[i].Name < imgs[j].Name })
	return imgs, nil
}

// localContainerdConfig is the containerd configuration a local instance adds to
// nodeadm's: its opt directory under its root, and oom_score_adj never below
// containerd's own. The CRI plugin gives pod sandboxes -998 (and the kubelet asks
// -997 for Guaranteed containers); lowering a score needs CAP_SYS_RESOURCE, which
// hosts such as this project's CI machines withhold even from root, and then runc
// fails every sandbox with "can't get final child's PID from pipe: EOF" (its nsexec
// cannot write /proc/self/oom_score_adj). Nodes share the host, so the kernel's OOM
// order among them matters little.
//
// Pod network namespaces are mounted under the instance's containerd state directory
// (netns_mounts_under_state_dir) rather than the host's /run/netns: the instance's
// teardown unmounts everything below its root, so a node stopped with pods still on it
// leaves no cni-* namespace behind on the host.
func localContainerdConfig(root string) string {
	return fmt.Sprintf("[plugins.\"io.containerd.internal.v1.opt\"]\n  path = %q\n\n"+
		"[plugins.\"io.containerd.grpc.v1.cri\"]\n  restrict_oom_score_adj = true\n  netns_mounts_under_state_dir = true\n", filepath.Join(root, "opt/containerd"))
}

// localRuntimeSpec is what a local instance changes in nodeadm's base OCI runtime spec:
// the open-files limit, within the host's. nodeadm asks a hard limit of 1048576, as
// on EC2; above the limit containerd runs with, runc cannot raise it without
// CAP_SYS_RESOURCE, and every container fails with "error setting rlimit type 7".
func localRuntimeSpec() map[string]any {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Max == 0 {
		return map[string]any{}
	}
	soft := min(lim.Max, 65536)
	return map[string]any{"process": map[string]any{
		"rlimits": []map[string]any{{"type": "RLIMIT_NOFILE", "soft": soft, "hard": lim.Max}},
	}}
}

// ImportLog is the log, under an instance's root, of the containerd that imports its
// images at launch.
const ImportLog = "var/log/containerd-import.log"

// ImportImages puts the image archives the provider is configured with into a real
// instance's containerd store before its containerd and kubelet start (so that the
// pause image and the add-ons' images, aws-node's nodejoin-netagent among them, are
// there for the first pod): it starts a containerd of its own over the instance's root,
// imports each archive, and stops it. It returns the archives imported; simulated
// instances have no containerd, and get none.
func (inst *Instance) ImportImages(ctx context.Context) ([]string, error) {
	p := inst.p
	if inst.Kubelet != KubeletReal || p.cfg.ImageArchives == nil {
		return nil, nil
	}
	archives, err := p.cfg.ImageArchives()
	if err != nil {
		return nil, err
	}
	if len(archives) == 0 {
		return nil, nil
	}
	c, err := StartContainerd(ctx, p.cfg.ContainerdPath, filepath.Join(inst.Root, "var/lib/containerd"),
		filepath.Join(inst.Root, "run/containerd-import"), filepath.Join(inst.Root, ImportLog))
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", inst.NodeName, err)
	}
	defer func() {
		c.Stop()
		_ = os.RemoveAll(filepath.Join(inst.Root, "run/containerd-import"))
	}()
	for _, a := range archives {
		if err := ImportArchive(ctx, c.Socket, a); err != nil {
			return nil, fmt.Errorf("node %s: %w", inst.NodeName, err)
		}
	}
	return archives, nil
}
