package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/nodejoin/nodejoin/internal/atomicfile"
	"github.com/nodejoin/nodejoin/internal/imagebuild"
)

// busyboxSource is upstream's busybox 1.37.0, the release upstream's busybox test image
// is (registry.k8s.io/e2e-test-images/busybox:1.37.0-2 mirrors busybox:1.37.0), as the
// upstream tarball of Debian's source package. Debian's binary packages are not used:
// Debian's patches make ash drop environment variables whose names are not shell
// identifiers, which upstream's ash passes on, and conformance tests run `sh -c env` to
// read variables named through envFrom prefixes such as "p-" and "1-".
var busyboxSource = imagebuild.SourcePin{
	Package: "busybox", Version: "1:1.37.0-6", Suite: "trixie",
	File: "busybox_1.37.0.orig.tar.bz2", SHA256: "3311dff32e746499f4df0d5df04d7eb396382d7e108bb9250e7b519b837043a4",
}

// busyboxRecipe changes whenever the build below changes, so that a cached binary of
// the old recipe is not reused.
const busyboxRecipe = "1: upstream defconfig, CONFIG_STATIC=y, SOURCE_DATE_EPOCH=1727395200"

// busyboxFor returns the busybox binary when an image that has it is among those to
// build (only: a comma-separated list, or "" for all), and "" otherwise.
func (b *builder) busyboxFor(ctx context.Context, only string) (string, error) {
	if only == "" {
		return b.busyboxBinary(ctx)
	}
	for _, name := range []string{"busybox", "nginx", "nonewprivs"} {
		if contains(strings.Split(only, ","), name) {
			return b.busyboxBinary(ctx)
		}
	}
	return "", nil
}

// busyboxBinary returns a static busybox built from busyboxSource with upstream's
// default configuration, as upstream's image has it. It is cached under
// CACHE/busybox/KEY/busybox, KEY hashing the source, the recipe and the compiler and C
// library it is built with; the build takes about a minute on 2 cores.
func (b *builder) busyboxBinary(ctx context.Context) (string, error) {
	key, err := busyboxKey(ctx)
	if err != nil {
		return "", err
	}
	dst := filepath.Join(b.cache, "busybox", key, "busybox")
	if _, err := os.Stat(dst); err == nil {
		return dst, nil
	}
	start := time.Now()
	fmt.Fprintf(b.w, "images: building busybox %s from source (key %s, about a minute)\n", busyboxSource.Version, key)
	tarball, err := imagebuild.FetchSource(ctx, busyboxSource, filepath.Join(b.cache, "sources"))
	if err != nil {
		return "", err
	}
	work, err := os.MkdirTemp(b.scratch, "busybox-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(work) }()
	if err := runIn(ctx, work, nil, "tar", "-xjf", tarball, "--strip-components=1"); err != nil {
		return "", err
	}
	// SOURCE_DATE_EPOCH (1.37.0's release day) replaces the build time in the banner, so
	// the same source and compiler give the same binary.
	env := []string{"SOURCE_DATE_EPOCH=1727395200", "LC_ALL=C"}
	if err := runIn(ctx, work, env, "make", "defconfig"); err != nil {
		return "", err
	}
	cfg := filepath.Join(work, ".config")
	data, err := os.ReadFile(cfg)
	if err != nil {
		return "", err
	}
	static := strings.Replace(string(data), "# CONFIG_STATIC is not set", "CONFIG_STATIC=y", 1)
	if static == string(data) {
		return "", fmt.Errorf("busybox's defconfig has no CONFIG_STATIC line to set")
	}
	if err := os.WriteFile(cfg, []byte(static), 0o644); err != nil { //nolint:gosec // G306: a build tree.
		return "", err
	}
	if err := runIn(ctx, work, env, "make", "-j"+fmt.Sprint(runtime.NumCPU()), "busybox"); err != nil {
		return "", err
	}
	built := filepath.Join(work, "busybox")
	if err := checkBusybox(ctx, built); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil { //nolint:gosec // G301: a cache of public builds.
		return "", err
	}
	if err := atomicfile.Copy(built, dst, 0o755); err != nil {
		return "", err
	}
	fmt.Fprintf(b.w, "images: busybox built in %s\n", time.Since(start).Round(time.Second))
	return dst, nil
}

// checkBusybox runs the built binary: it must be upstream's ash, passing on an
// environment variable whose name is not a shell identifier.
func checkBusybox(ctx context.Context, bin string) error {
	cmd := exec.CommandContext(ctx, bin, "sh", "-c", "env")
	cmd.Env = []string{"p-data-1=value-1", "PATH=/bin"}
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("running the built busybox: %w", err)
	}
	if !strings.Contains(string(out), "p-data-1=value-1\n") {
		return fmt.Errorf("the built busybox's sh dropped the variable p-data-1 from its environment:\n%s", out)
	}
	return nil
}

// busyboxKey hashes the source, the recipe, and the compiler and C library versions.
func busyboxKey(ctx context.Context) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "source %s %s\nrecipe %s\n", busyboxSource.File, busyboxSource.SHA256, busyboxRecipe)
	for _, c := range [][]string{{"gcc", "--version"}, {"dpkg-query", "-W", "-f", "${Version}", "libc6-dev"}} {
		out, err := exec.CommandContext(ctx, c[0], c[1:]...).Output()
		if err != nil {
			return "", fmt.Errorf("%s (busybox is built with gcc and libc6-dev: `make deps` installs them): %w", strings.Join(c, " "), err)
		}
		first, _, _ := strings.Cut(string(out), "\n")
		fmt.Fprintf(h, "%s: %s\n", c[0], first)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// runIn runs a command in dir, with env added to this process's environment.
func runIn(ctx context.Context, dir string, env []string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s in %s: %w: %s", name, strings.Join(args, " "), dir, err, imagebuild.LastLines(string(out), 15))
	}
	return nil
}
