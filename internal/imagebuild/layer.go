// Package imagebuild assembles container images without a container engine: layers
// from files on disk or in memory, written as reproducible tar.gz blobs (sorted
// entries, one fixed timestamp, root ownership unless told otherwise), an image config
// for linux/amd64, and docker-save archives that `ctr images import` loads under the
// images' names. It also fetches pinned Debian packages and checks that every ELF file
// in a root filesystem finds the shared libraries it needs.
package imagebuild

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Epoch is the timestamp of every file, layer and image built here, so that the same
// inputs give the same digests.
var Epoch = time.Unix(0, 0).UTC()

// Entry is one file, directory or symbolic link of a layer.
type Entry struct {
	// Path inside the image, without a leading slash ("usr/bin/curl").
	Path string
	Type byte // tar.TypeReg, tar.TypeDir or tar.TypeSymlink
	Mode fs.FileMode
	UID  int
	GID  int
	// Linkname is a symbolic link's target.
	Linkname string
	// A regular file's content: Data, or the file at Source.
	Data   []byte
	Source string
}

// Layer is a set of entries keyed by path; adding a path again replaces it.
type Layer struct {
	// Comment goes into the image's history for this layer.
	Comment string
	entries map[string]Entry
}

// NewLayer returns an empty layer.
func NewLayer(comment string) *Layer {
	return &Layer{Comment: comment, entries: map[string]Entry{}}
}

func cleanPath(p string) string {
	return strings.TrimPrefix(path.Clean("/"+p), "/")
}

// Add puts e into the layer, with its parent directories (mode 0755, root) where the
// layer does not have them yet.
func (l *Layer) Add(e Entry) {
	e.Path = cleanPath(e.Path)
	if e.Path == "" {
		return
	}
	for dir := path.Dir(e.Path); dir != "." && dir != "/"; dir = path.Dir(dir) {
		if _, ok := l.entries[dir]; ok {
			break
		}
		l.entries[dir] = Entry{Path: dir, Type: tar.TypeDir, Mode: 0o755}
	}
	l.entries[e.Path] = e
}

// File adds a regular file with content data.
func (l *Layer) File(p string, mode fs.FileMode, data []byte) {
	l.Add(Entry{Path: p, Type: tar.TypeReg, Mode: mode, Data: data})
}

// CopyFile adds the file at src as p.
func (l *Layer) CopyFile(p string, mode fs.FileMode, src string) {
	l.Add(Entry{Path: p, Type: tar.TypeReg, Mode: mode, Source: src})
}

// Dir adds a directory.
func (l *Layer) Dir(p string, mode fs.FileMode) {
	l.Add(Entry{Path: p, Type: tar.TypeDir, Mode: mode})
}

// Symlink adds a symbolic link p → target.
func (l *Layer) Symlink(p, target string) {
	l.Add(Entry{Path: p, Type: tar.TypeSymlink, Mode: 0o777, Linkname: target})
}

// Has reports whether the layer holds p.
func (l *Layer) Has(p string) bool {
	_, ok := l.entries[cleanPath(p)]
	return ok
}

// Lookup returns the entry at p.
func (l *Layer) Lookup(p string) (Entry, bool) {
	e, ok := l.entries[cleanPath(p)]
	return e, ok
}

// Entries returns the entries sorted by path.
func (l *Layer) Entries() []Entry {
	out := make([]Entry, 0, len(l.entries))
	for _, e := range l.entries {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// AddTree adds the files under dir (an extracted package, for example) at the same
// paths in the layer, skipping the paths skip reports (relative, slash-separated).
// Regular files keep their permission bits; ownership becomes root's.
func (l *Layer) AddTree(dir string, skip func(rel string, d fs.DirEntry) bool) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if skip != nil && skip(rel, d) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		perm := info.Mode().Perm() | info.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)
		switch {
		case d.IsDir():
			// A directory another tree already added keeps its entry.
			if e, ok := l.entries[cleanPath(rel)]; !ok || e.Type != tar.TypeDir {
				l.Add(Entry{Path: rel, Type: tar.TypeDir, Mode: perm})
			}
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			l.Symlink(rel, target)
		case info.Mode().IsRegular():
			l.Add(Entry{Path: rel, Type: tar.TypeReg, Mode: perm, Source: p})
		default:
			return fmt.Errorf("adding %s to a layer: unsupported file type %s", p, info.Mode().Type())
		}
		return nil
	})
}

// tarMode turns a FileMode's permission and special bits into tar's mode bits.
func tarMode(m fs.FileMode) int64 {
	out := int64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		out |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		out |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		out |= 0o1000
	}
	return out
}

// WriteTar writes the layer as an uncompressed tar: entries in path order, every
// timestamp Epoch, no user or group names.
func (l *Layer) WriteTar(w io.Writer) error {
	tw := tar.NewWriter(w)
	for _, e := range l.Entries() {
		if err := writeEntry(tw, e); err != nil {
			return fmt.Errorf("layer entry /%s: %w", e.Path, err)
		}
	}
	return tw.Close()
}

func writeEntry(tw *tar.Writer, e Entry) error {
	h := &tar.Header{
		Typeflag: e.Type, Name: e.Path, Linkname: e.Linkname, Mode: tarMode(e.Mode),
		Uid: e.UID, Gid: e.GID, ModTime: Epoch, Format: tar.FormatPAX,
	}
	switch e.Type {
	case tar.TypeDir:
		h.Name += "/"
		return tw.WriteHeader(h)
	case tar.TypeSymlink:
		return tw.WriteHeader(h)
	case tar.TypeReg:
	default:
		return fmt.Errorf("unsupported type %q", e.Type)
	}
	if e.Source == "" {
		h.Size = int64(len(e.Data))
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := tw.Write(e.Data)
		return err
	}
	f, err := os.Open(e.Source)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	h.Size = st.Size()
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	if n, err := io.Copy(tw, f); err != nil {
		return err
	} else if n != h.Size {
		return fmt.Errorf("%s changed while it was read", e.Source)
	}
	return nil
}

// WriteTarGz writes the layer, gzip-compressed with a header that holds no name or
// time, to path.
func (l *Layer) WriteTarGz(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	zw, err := gzip.NewWriterLevel(f, gzip.DefaultCompression)
	if err != nil {
		_ = f.Close()
		return err
	}
	if err := l.WriteTar(zw); err != nil {
		_ = f.Close()
		return err
	}
	if err := zw.Close(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
