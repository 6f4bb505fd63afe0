package imagebuild

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Pin is one Debian package at one version, with the SHA256 of its .deb file.
type Pin struct {
	Name, Version, SHA256 string
	// Sets are the root filesystems that get the package's files.
	Sets []string
	// Comment says why the package is there.
	Comment string
	// Line is the pin's line in its file.
	Line int
}

// ParsePins reads a pin file: one `NAME VERSION SHA256 SET[,SET...]  # comment` a line;
// blank lines and lines starting with # are skipped. Every entry needs its comment.
func ParsePins(r io.Reader, file string) ([]Pin, error) {
	var out []Pin
	seen := map[string]int{}
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		body, comment, ok := strings.Cut(line, "#")
		comment = strings.TrimSpace(comment)
		if !ok || comment == "" {
			return nil, fmt.Errorf("%s:%d: a pin needs a comment saying why the package is there (`... # why`)", file, n)
		}
		f := strings.Fields(body)
		if len(f) != 4 {
			return nil, fmt.Errorf("%s:%d: want `NAME VERSION SHA256 SETS  # comment`, got %d fields", file, n, len(f))
		}
		if sum, err := hex.DecodeString(f[2]); err != nil || len(sum) != sha256.Size {
			return nil, fmt.Errorf("%s:%d: %q is not a SHA256 (64 hex digits)", file, n, f[2])
		}
		if prev, ok := seen[f[0]]; ok {
			return nil, fmt.Errorf("%s:%d: package %s is already pinned on line %d", file, n, f[0], prev)
		}
		seen[f[0]] = n
		out = append(out, Pin{Name: f[0], Version: f[1], SHA256: strings.ToLower(f[2]), Sets: strings.Split(f[3], ","), Comment: comment, Line: n})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", file, err)
	}
	return out, nil
}

// InSet returns the pins whose sets include set, in file order.
func InSet(pins []Pin, set string) []Pin {
	var out []Pin
	for _, p := range pins {
		if slices.Contains(p.Sets, set) {
			out = append(out, p)
		}
	}
	return out
}

// Fetch returns the path of p's .deb in cacheDir (named by its SHA256), downloading it
// with `apt-get download NAME=VERSION` when missing. A file whose SHA256 is not the
// pinned one is refused.
func Fetch(ctx context.Context, p Pin, cacheDir string) (string, error) {
	what := fmt.Sprintf("%s=%s (line %d)", p.Name, p.Version, p.Line)
	return download(cacheDir, p.SHA256+".deb", p.SHA256, what, func(tmp string) (string, error) {
		// apt runs its download as _apt when it can; the scratch directory must let it write.
		_ = os.Chmod(tmp, 0o777) //nolint:gosec // G302: apt's _apt user writes the download here; it is checked by hash before use.
		cmd := exec.CommandContext(ctx, "apt-get", "download", "-q", p.Name+"="+p.Version)
		cmd.Dir = tmp
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("apt-get download %s=%s (pinned on line %d; run `apt-get update` if apt does not know the version): %w: %s",
				p.Name, p.Version, p.Line, err, strings.TrimSpace(out.String()))
		}
		debs, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
		if len(debs) != 1 {
			return "", fmt.Errorf("apt-get download %s=%s left %d .deb files, want 1", p.Name, p.Version, len(debs))
		}
		return debs[0], nil
	})
}

// download returns the path of cacheDir/name, whose SHA256 must be sum: kept when it is
// there already, otherwise fetched by get into a scratch directory under cacheDir (get
// returns the fetched file's path) and moved in once its hash is checked. A file of
// another hash is refused; what names it in errors.
func download(cacheDir, name, sum, what string, get func(tmp string) (string, error)) (string, error) {
	dst := filepath.Join(cacheDir, name)
	if got, err := FileSHA256(dst); err == nil && got == sum {
		return dst, nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil { //nolint:gosec // G301: a cache of public packages and sources.
		return "", err
	}
	tmp, err := os.MkdirTemp(cacheDir, ".download-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	path, err := get(tmp)
	if err != nil {
		return "", err
	}
	got, err := FileSHA256(path)
	if err != nil {
		return "", err
	}
	if got != sum {
		return "", fmt.Errorf("%s: the downloaded file has SHA256 %s, but the pin says %s: refusing it", what, got, sum)
	}
	if err := os.Rename(path, dst); err != nil {
		return "", err
	}
	return dst, nil
}

// Extract unpacks the .deb at deb into dir with `dpkg-deb -x` (the package's files,
// without running its maintainer scripts).
func Extract(ctx context.Context, deb, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil { //nolint:gosec // G301: the package's files, public.
		return err
	}
	out, err := exec.CommandContext(ctx, "dpkg-deb", "-x", deb, dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("dpkg-deb -x %s: %w: %s", deb, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// FileSHA256 returns the hex SHA256 of the file at path.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
