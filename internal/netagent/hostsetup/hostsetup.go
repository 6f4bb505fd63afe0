// Package hostsetup is what aws-node's init container does on a node, as the VPC CNI's
// aws-vpc-cni-init does: install the CNI plugins into the node's CNI bin directory
// without ever exposing a half-written or truncated plugin, and set the kernel
// parameters pod networking needs, in the node's network namespace (the pod runs with
// the host network).
package hostsetup

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/nodejoin/nodejoin/internal/atomicfile"
)

// Report says what InstallPlugins did.
type Report struct {
	Installed []string
	Unchanged []string
}

// InstallPlugins copies every regular file of from into to. Each copy goes to a
// temporary file in to, is synced and renamed over the plugin, so a runtime executing
// the old plugin keeps its inode and never sees "text file busy" or half a binary; a
// plugin whose content and mode are already right is left alone. Files named in skip
// are not copied.
func InstallPlugins(from, to string, skip ...string) (Report, error) {
	var rep Report
	entries, err := os.ReadDir(from)
	if err != nil {
		return rep, fmt.Errorf("reading the plugins to install from %s: %w", from, err)
	}
	//nolint:gosec // G301: the runtime executes plugins from here as root; the directory is the node's /opt/cni/bin.
	if err := os.MkdirAll(to, 0o755); err != nil {
		return rep, fmt.Errorf("creating the CNI bin directory %s: %w", to, err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.Type().IsRegular() && !strings.HasPrefix(e.Name(), ".") && !contains(skip, e.Name()) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		return rep, fmt.Errorf("no plugins in %s: point --plugins-from at the image's plugin directory", from)
	}
	for _, name := range names {
		src, dst := filepath.Join(from, name), filepath.Join(to, name)
		fi, err := os.Stat(src)
		if err != nil {
			return rep, fmt.Errorf("plugin %s: %w", src, err)
		}
		mode := fi.Mode().Perm() | 0o555 // plugins are executables for everyone
		same, err := identical(src, dst, mode)
		if err != nil {
			return rep, err
		}
		if same {
			rep.Unchanged = append(rep.Unchanged, name)
			continue
		}
		if err := atomicfile.Copy(src, dst, mode); err != nil {
			return rep, fmt.Errorf("installing plugin %s into %s: %w", name, to, err)
		}
		rep.Installed = append(rep.Installed, name)
	}
	return rep, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// identical reports whether dst exists with mode and the same content as src.
func identical(src, dst string, mode os.FileMode) (bool, error) {
	di, err := os.Stat(dst)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("plugin %s: %w", dst, err)
	}
	si, err := os.Stat(src)
	if err != nil {
		return false, fmt.Errorf("plugin %s: %w", src, err)
	}
	if !di.Mode().IsRegular() || di.Size() != si.Size() || di.Mode().Perm() != mode {
		return false, nil
	}
	a, err := os.Open(src)
	if err != nil {
		return false, fmt.Errorf("plugin %s: %w", src, err)
	}
	defer func() { _ = a.Close() }()
	b, err := os.Open(dst)
	if err != nil {
		return false, fmt.Errorf("plugin %s: %w", dst, err)
	}
	defer func() { _ = b.Close() }()
	bufA, bufB := make([]byte, 64<<10), make([]byte, 64<<10)
	for {
		na, errA := io.ReadFull(a, bufA)
		nb, errB := io.ReadFull(b, bufB)
		if na != nb || !bytes.Equal(bufA[:na], bufB[:nb]) {
			return false, nil
		}
		if errA == io.EOF || errA == io.ErrUnexpectedEOF {
			return errB == io.EOF || errB == io.ErrUnexpectedEOF, nil
		}
		if errA != nil {
			return false, fmt.Errorf("reading plugin %s: %w", src, errA)
		}
		if errB != nil {
			return false, fmt.Errorf("reading plugin %s: %w", dst, errB)
		}
	}
}
