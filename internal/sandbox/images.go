package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/nodejoin/nodejoin/internal/atomicfile"
	"github.com/nodejoin/nodejoin/internal/sandbox/instance"
)

// loadedImagesFile lists, in a cluster's state directory, the archives `nodejoin image
// load` imported, one path a line, so that nodes added later get them too.
const loadedImagesFile = "images/loaded.txt"

// imageArchives returns the archives every real node imports at launch: the built-in
// ones in binDir/images (sorted by name), then those loaded into the cluster, in load
// order.
func imageArchives(binDir, stateDir string) ([]string, error) {
	var out []string
	if binDir != "" {
		built, err := filepath.Glob(filepath.Join(binDir, "images", "*.tar"))
		if err != nil {
			return nil, err
		}
		sort.Strings(built)
		out = append(out, built...)
	}
	loaded, err := readLoadedImages(stateDir)
	if err != nil {
		return nil, err
	}
	return append(out, loaded...), nil
}

func readLoadedImages(stateDir string) ([]string, error) {
	f, err := os.Open(filepath.Join(stateDir, loadedImagesFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			out = append(out, l)
		}
	}
	return out, sc.Err()
}

// NodeImages is one node's part of an image load or list.
type NodeImages struct {
	Node     string           `json:"node"`
	Instance string           `json:"instance"`
	Kubelet  string           `json:"kubelet"`
	Images   []instance.Image `json:"images,omitempty"`
	// Loaded are the archives imported into the node (image load).
	Loaded []string `json:"loaded,omitempty"`
	// Skipped says why the node was left out (a simulated kubelet has no containerd).
	Skipped string `json:"skipped,omitempty"`
	Error   string `json:"error,omitempty"`
}

// skippedSim is why simulated nodes take no part in image loads and lists.
const skippedSim = "simulated kubelet: no containerd"

// skippedGone is why a node whose containerd socket is gone (a terminated instance)
// is left out.
const skippedGone = "no containerd socket: the instance is not running"

// LoadImages imports image archives (docker-save or OCI) into the containerd of every
// real node of the named cluster, node by node concurrently, and records them in the
// cluster's state directory so that nodes launched later import them too. Each archive
// is copied into the state directory first, so the user's file may go away. The result
// has one entry per node; the error says which nodes failed.
func LoadImages(ctx context.Context, name string, archives []string) ([]NodeImages, error) {
	if len(archives) == 0 {
		return nil, errors.New("no image archive given")
	}
	stateDir, _, err := running(name)
	if err != nil {
		return nil, err
	}
	recs, err := instance.ReadRecords(filepath.Join(stateDir, "instances"))
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(stateDir, filepath.Dir(loadedImagesFile))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	var kept []string
	for _, a := range archives {
		abs, err := filepath.Abs(a)
		if err != nil {
			return nil, err
		}
		st, err := os.Stat(abs)
		if err != nil {
			return nil, fmt.Errorf("image archive: %w", err)
		}
		if !st.Mode().IsRegular() {
			return nil, fmt.Errorf("image archive %s is not a regular file", a)
		}
		dst := filepath.Join(dir, fmt.Sprintf("%03d-%s", len(kept)+countLoaded(stateDir), filepath.Base(abs)))
		if err := atomicfile.Copy(abs, dst, 0o644); err != nil {
			return nil, fmt.Errorf("keeping image archive %s for later nodes: %w", a, err)
		}
		kept = append(kept, dst)
	}
	out := eachContainerd(recs, func(sock string, ni *NodeImages) {
		for _, a := range kept {
			if err := instance.ImportArchive(ctx, sock, a); err != nil {
				ni.Error = err.Error()
				return
			}
			ni.Loaded = append(ni.Loaded, a)
		}
	})
	// Recorded even when a node failed: the archives are good for the others and for
	// nodes to come.
	if err := appendLoaded(stateDir, kept); err != nil {
		return out, err
	}
	var failed []string
	for _, n := range out {
		if n.Error != "" {
			failed = append(failed, n.Node+": "+n.Error)
		}
	}
	if len(failed) > 0 {
		return out, fmt.Errorf("image load failed on %d node(s): %s", len(failed), strings.Join(failed, "; "))
	}
	return out, nil
}

func countLoaded(stateDir string) int {
	l, _ := readLoadedImages(stateDir)
	return len(l)
}

func appendLoaded(stateDir string, archives []string) error {
	prev, err := readLoadedImages(stateDir)
	if err != nil {
		return err
	}
	all := append(prev, archives...)
	return atomicfile.WriteFile(filepath.Join(stateDir, loadedImagesFile), []byte(strings.Join(all, "\n")+"\n"), 0o644)
}

// ListImages lists, per node of the named cluster, the images its containerd holds
// (simulated nodes are listed as skipped).
func ListImages(ctx context.Context, name string) ([]NodeImages, error) {
	stateDir, _, err := running(name)
	if err != nil {
		return nil, err
	}
	recs, err := instance.ReadRecords(filepath.Join(stateDir, "instances"))
	if err != nil {
		return nil, err
	}
	out := eachContainerd(recs, func(sock string, ni *NodeImages) {
		imgs, err := instance.ListImages(ctx, sock)
		if err != nil {
			ni.Error = err.Error()
			return
		}
		ni.Images = imgs
	})
	return out, nil
}

// eachContainerd runs fn for every real node whose containerd is up, all nodes at once,
// and returns one entry per node in the records' order; the others say why they were
// skipped.
func eachContainerd(recs []*instance.Record, fn func(sock string, ni *NodeImages)) []NodeImages {
	out := make([]NodeImages, len(recs))
	var wg sync.WaitGroup
	for i, r := range recs {
		out[i] = NodeImages{Node: r.NodeName, Instance: r.ID, Kubelet: string(r.Kubelet)}
		if r.Kubelet != instance.KubeletReal {
			out[i].Skipped = skippedSim
			continue
		}
		sock := filepath.Join(r.Root, instance.ContainerdSocket)
		if _, err := os.Stat(sock); err != nil {
			out[i].Skipped = skippedGone
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(sock, &out[i])
		}()
	}
	wg.Wait()
	return out
}
