// Package bootstrap is the node agent's work: it reads and merges a node's configuration
// sources and the instance's metadata, renders the files the kubelet and containerd
// need, writes them atomically and starts the daemons (nodeadm init, InitOptions); it
// checks, dumps and explains configurations, and mints the kubelet's identity token
// (nodeadm get-token).
// Each part has a file of its own. It imports nodeadm/nodeconfig, userdata and the api/
// types.
package bootstrap

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nodejoin/nodejoin/internal/atomicfile"
)

// File is one file to write on the node.
type File struct {
	// Path is absolute, as on the node; Write places it under its root.
	Path    string
	Mode    fs.FileMode
	Content []byte
}

// Files is a set of files, kept sorted by path so that output is deterministic.
type Files []File

func (fs *Files) add(path string, mode fs.FileMode, content []byte) {
	*fs = append(*fs, File{Path: path, Mode: mode, Content: content})
}

// Sorted returns the files ordered by path.
func (fs Files) Sorted() Files {
	out := slices.Clone(fs)
	slices.SortFunc(out, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// WriteResult says what Write did to each file.
type WriteResult struct {
	Written   []string
	Unchanged []string
}

// Write places every file under root, each atomically (temporary file, fsync, rename)
// with its mode. A file whose content and mode are already right is left alone, so
// running twice changes nothing. All files are rendered before Write is called, so a
// failure in rendering never leaves a half-configured node; a failure while writing
// leaves every file either old or new, never partial.
func (fs Files) Write(root string) (WriteResult, error) {
	var res WriteResult
	for _, f := range fs.Sorted() {
		if !filepath.IsAbs(f.Path) {
			return res, fmt.Errorf("file path %q is not absolute", f.Path)
		}
		dst := filepath.Join(root, f.Path)
		if same(dst, f) {
			res.Unchanged = append(res.Unchanged, f.Path)
			continue
		}
		if err := atomicfile.WriteFile(dst, f.Content, f.Mode); err != nil {
			return res, fmt.Errorf("writing %s: %w", f.Path, err)
		}
		res.Written = append(res.Written, f.Path)
	}
	return res, nil
}

func same(path string, f File) bool {
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != f.Mode.Perm() || st.Size() != int64(len(f.Content)) {
		return false
	}
	cur, err := os.ReadFile(path)
	return err == nil && bytes.Equal(cur, f.Content)
}

// ErrNotRoot reports that nodeadm must run as root to configure this host.
var ErrNotRoot = errors.New("must run as root")
