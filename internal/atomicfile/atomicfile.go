// Package atomicfile writes files so that a reader sees either the old content or the
// new content, never a partial write: temp file in the same directory, fsync, rename,
// fsync of the directory.
package atomicfile

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// WriteFile replaces path with data and gives it mode perm. Missing parent directories
// are created with mode 0o755. On failure the previous file, if any, is left untouched.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return Write(path, bytes.NewReader(data), perm)
}

// Copy replaces dst with the content of src (streamed, so large archives are never held
// in memory) and gives it mode perm, atomically as WriteFile does.
func Copy(src, dst string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	return Write(dst, in, perm)
}

// Write replaces path with everything r yields and gives it mode perm, atomically as
// WriteFile does. On a read or write failure the previous file is left untouched.
func Write(path string, r io.Reader, perm os.FileMode) error {
	dir := filepath.Dir(path)
	//nolint:gosec // G301: parents such as /etc/kubernetes must stay traversable by the daemons that read these files.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating directory %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("creating temporary file for %s: %w", path, err)
	}
	tmpName := tmp.Name()
	committed := false
	defer func() {
		if !committed {
			_ = tmp.Close()
			_ = os.Remove(tmpName)
		}
	}()
	// Chmod before writing so that secrets are never readable with a looser mode.
	if err := tmp.Chmod(perm); err != nil {
		return fmt.Errorf("setting mode of %s: %w", tmpName, err)
	}
	if _, err := io.Copy(tmp, r); err != nil {
		return fmt.Errorf("writing %s: %w", tmpName, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", tmpName, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", tmpName, err)
	}
	if err := os.Rename(tmpName, path); err != nil {
		return fmt.Errorf("renaming %s to %s: %w", tmpName, path, err)
	}
	committed = true
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("opening directory %s: %w", dir, err)
	}
	syncErr := d.Sync()
	closeErr := d.Close()
	if syncErr != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, syncErr)
	}
	return closeErr
}
