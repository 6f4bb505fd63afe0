package imagebuild

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// SourcePin is one file of a Debian source package at one version, with its SHA256:
// what an image builds from source when no binary package of the right build exists.
type SourcePin struct {
	// Package and Version are the source package's (`apt-get source NAME=VERSION`).
	Package, Version string
	// Suite is the Debian suite that carries that version (it may be newer than the
	// machine's own: only its source index is read, in a private apt configuration).
	Suite string
	// File is the file of the source package that is used, such as the upstream
	// tarball NAME_VERSION.orig.tar.bz2, and SHA256 its hash.
	File, SHA256 string
}

// FetchSource returns the path of sp.File in cacheDir (named by its SHA256),
// downloading the source package with `apt-get source --download-only` when missing.
// apt reads sp.Suite's source index from the Debian archive the machine's own apt
// sources name, through a private configuration under a temporary directory: the
// machine's sources, lists and cache are not touched. A file whose SHA256 is not the
// pinned one is refused.
func FetchSource(ctx context.Context, sp SourcePin, cacheDir string) (string, error) {
	what := fmt.Sprintf("%s of source package %s=%s", sp.File, sp.Package, sp.Version)
	return download(cacheDir, sp.SHA256+"-"+sp.File, sp.SHA256, what, func(tmp string) (string, error) {
		uri, err := archiveURI("/etc/apt/sources.list.d", "/etc/apt/sources.list")
		if err != nil {
			return "", err
		}
		for _, d := range []string{"sources.d", "lists/partial", "cache/archives/partial", "work"} {
			if err := os.MkdirAll(filepath.Join(tmp, d), 0o755); err != nil { //nolint:gosec // G301: apt's private directories.
				return "", err
			}
		}
		entry := fmt.Sprintf("Types: deb-src\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n", uri, sp.Suite)
		if err := os.WriteFile(filepath.Join(tmp, "sources.d", sp.Suite+"-src.sources"), []byte(entry), 0o644); err != nil { //nolint:gosec // G306: apt reads it.
			return "", err
		}
		opts := []string{
			"-q", "-o", "Dir::Etc::SourceList=/dev/null", "-o", "Dir::Etc::SourceParts=" + filepath.Join(tmp, "sources.d"),
			"-o", "Dir::State::Lists=" + filepath.Join(tmp, "lists"), "-o", "Dir::Cache=" + filepath.Join(tmp, "cache"),
			// The downloads go to directories of this process's user: no sandbox user
			// needs to write there (the file is checked by hash before use).
			"-o", "APT::Sandbox::User=root",
		}
		for _, args := range [][]string{{"update"}, {"source", "--download-only", sp.Package + "=" + sp.Version}} {
			cmd := exec.CommandContext(ctx, "apt-get", append(slices.Clone(opts), args...)...)
			cmd.Dir = filepath.Join(tmp, "work")
			if out, err := cmd.CombinedOutput(); err != nil {
				return "", fmt.Errorf("apt-get %s (the %s source index of %s): %w: %s", strings.Join(args, " "), sp.Suite, uri, err, LastLines(string(out), 5))
			}
		}
		return filepath.Join(tmp, "work", sp.File), nil
	})
}

// archiveURI returns the URI of the main Debian archive among the machine's apt
// sources: the first `deb` entry of a suite without a dash (bookworm, not
// bookworm-security or bookworm-updates), from the deb822 files in dir (*.sources) and
// then the one-line list file.
func archiveURI(dir, list string) (string, error) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.sources"))
	for _, f := range files {
		uri, err := scanSources(f, parseDeb822)
		if err != nil || uri != "" {
			return uri, err
		}
	}
	lists, _ := filepath.Glob(filepath.Join(dir, "*.list"))
	for _, f := range append([]string{list}, lists...) {
		uri, err := scanSources(f, parseOneLine)
		if err != nil || uri != "" {
			return uri, err
		}
	}
	return "", fmt.Errorf("no Debian archive among apt's sources (%s, %s): add one (Types: deb, a suite such as bookworm)", dir, list)
}

func scanSources(file string, parse func(io.Reader) string) (string, error) {
	f, err := os.Open(file)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	return parse(f), nil
}

// parseDeb822 returns the URI of the first archive stanza (see archiveURI) of a
// deb822 sources file, or "".
func parseDeb822(r io.Reader) string {
	fields := map[string]string{}
	pick := func() string {
		defer clear(fields)
		if !slices.Contains(strings.Fields(fields["types"]), "deb") || fields["enabled"] == "no" {
			return ""
		}
		uris := strings.Fields(fields["uris"])
		if len(uris) == 0 || !slices.ContainsFunc(strings.Fields(fields["suites"]), isReleaseSuite) {
			return ""
		}
		return uris[0]
	}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			if uri := pick(); uri != "" {
				return uri
			}
			continue
		}
		if strings.HasPrefix(line, "#") || strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t") {
			continue // comments and continuation lines (no field used here spans lines)
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
		}
	}
	return pick()
}

// parseOneLine returns the URI of the first archive line (see archiveURI) of a
// one-line sources.list, or "".
func parseOneLine(r io.Reader) string {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 || f[0] != "deb" {
			continue
		}
		if strings.HasPrefix(f[1], "[") { // options: deb [signed-by=...] URI SUITE ...
			for len(f) > 1 && !strings.HasSuffix(f[1], "]") {
				f = slices.Delete(f, 1, 2)
			}
			if len(f) < 4 {
				continue
			}
			f = slices.Delete(f, 1, 2)
		}
		if isReleaseSuite(f[2]) {
			return f[1]
		}
	}
	return ""
}

func isReleaseSuite(s string) bool {
	return s != "" && !strings.Contains(s, "-") && !strings.Contains(s, "/")
}

// LastLines returns the last n lines of s, trimmed: the end of a command's output, where
// its error is.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
