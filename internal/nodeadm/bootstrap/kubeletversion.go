package bootstrap

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/nodejoin/nodejoin/internal/atomicfile"
)

// KubeletVersionCachePath is where nodeadm remembers the kubelet's `--version` answer,
// as a path on the node. It survives reboots, so an unchanged kubelet is asked once:
// asking costs about 0.3 s, most of an `init --skip run`.
const KubeletVersionCachePath = "/var/lib/nodeadm/kubelet-version.json"

// kubeletVersionCache is the cache file: the binary's identity and its answer.
type kubeletVersionCache struct {
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	ModTime int64  `json:"modTimeUnixNano"`
	Version string `json:"version"`
}

// VersionAnswer is what KubeletVersion found.
type VersionAnswer struct {
	// Text is the output of `kubelet --version`, such as "Kubernetes v1.37.1\n".
	Text string
	// Cached says it came from the cache file, without running the kubelet.
	Cached bool
	// CacheErr is a failure to record the answer; the answer is still good.
	CacheErr error
}

// KubeletVersion returns the output of `bin --version`: from cacheFile when it was
// recorded for the same binary (absolute path, size and modification time), else by
// running bin and recording the answer in cacheFile atomically. A cache file that is
// missing, unreadable or for another binary costs one run of bin, never an error; an
// empty cacheFile is neither read nor written.
func KubeletVersion(ctx context.Context, bin, cacheFile string) (VersionAnswer, error) {
	path, err := exec.LookPath(bin)
	if err != nil {
		return VersionAnswer{}, fmt.Errorf("finding the kubelet %s: %w", bin, err)
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	st, err := os.Stat(path)
	if err != nil {
		return VersionAnswer{}, fmt.Errorf("finding the kubelet %s: %w", bin, err)
	}
	id := kubeletVersionCache{Path: path, Size: st.Size(), ModTime: st.ModTime().UnixNano()}
	if data, err := os.ReadFile(cacheFile); cacheFile != "" && err == nil {
		var c kubeletVersionCache
		if json.Unmarshal(data, &c) == nil && c.Version != "" && c.Path == id.Path && c.Size == id.Size && c.ModTime == id.ModTime {
			return VersionAnswer{Text: c.Version, Cached: true}, nil
		}
	}
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return VersionAnswer{}, fmt.Errorf("%s --version: %w", path, err)
	}
	id.Version = string(out)
	a := VersionAnswer{Text: id.Version}
	if cacheFile == "" {
		return a, nil
	}
	data, err := json.Marshal(id)
	if err == nil {
		err = atomicfile.WriteFile(cacheFile, append(data, '\n'), 0o644)
	}
	if err != nil {
		a.CacheErr = fmt.Errorf("recording the kubelet's version in %s: %w", cacheFile, err)
	}
	return a, nil
}
