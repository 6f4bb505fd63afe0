package imagebuild

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

var update = flag.Bool("update", false, "rewrite golden files")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run with -update to accept):\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}

func tinyImage(t *testing.T, dir string) v1.Image {
	t.Helper()
	base := NewLayer("base")
	base.File("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\n"))
	base.Dir("tmp", 0o777|os.ModeSticky)
	app := NewLayer("app")
	app.File("usr/local/bin/app", 0o755, []byte("#!/bin/sh\necho hi\n"))
	app.Symlink("app", "usr/local/bin/app")
	app.Add(Entry{Path: "/home/user/", Type: tar.TypeDir, Mode: 0o700, UID: 1000, GID: 50000})
	img, err := Build(Image{Layers: []*Layer{base, app}, Config: tinyConfig()}, dir)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func tinyConfig() v1.Config {
	return v1.Config{Entrypoint: []string{"/app"}, Cmd: []string{"pause"}, User: "65535:65535", Env: []string{"PATH=/usr/bin:/bin"}}
}

func indent(t *testing.T, raw []byte) []byte {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(out, '\n')
}

func TestImageManifestAndConfigAreGolden(t *testing.T) {
	img := tinyImage(t, t.TempDir())
	cfg, err := img.RawConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "tiny-config.json", indent(t, cfg))
	m, err := img.RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "tiny-manifest.json", indent(t, m))
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" || !cf.Created.Equal(Epoch) || len(cf.History) != 2 {
		t.Errorf("config: os %q arch %q created %v history %d", cf.OS, cf.Architecture, cf.Created, len(cf.History))
	}
}

// layerEntries reads a tar.gz layer's headers.
func layerEntries(t *testing.T, r io.Reader) []*tar.Header {
	t.Helper()
	zr, err := gzip.NewReader(r)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var out []*tar.Header
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, h)
	}
}

func TestArchiveContents(t *testing.T) {
	dir := t.TempDir()
	img := tinyImage(t, dir)
	archive := filepath.Join(dir, "tiny.tar")
	if err := WriteArchive(archive, img, "registry.k8s.io/pause:3.10.2", "example.com/a:1", "example.com/b:2"); err != nil {
		t.Fatal(err)
	}
	m, err := ReadArchiveManifest(archive)
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 1 || !reflect.DeepEqual(m[0].RepoTags, []string{"example.com/a:1", "example.com/b:2", "registry.k8s.io/pause:3.10.2"}) || len(m[0].Layers) != 2 {
		t.Fatalf("manifest.json: %+v", m)
	}
	// The archive holds the config, both layers and manifest.json; the second layer's
	// entries are sorted, with their parent directories, at Epoch, owned by root
	// unless set.
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	var names []string
	var app []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Name == m[0].Layers[1] {
			for _, e := range layerEntries(t, tr) {
				app = append(app, e.Name+" "+strings.TrimLeft(e.FileInfo().Mode().Perm().String(), "-")+" "+e.Linkname)
				if !e.ModTime.Equal(Epoch) || (e.Uid != 0 && e.Name != "home/user/") || e.Uname != "" {
					t.Errorf("entry %s: mtime %v uid %d uname %q", e.Name, e.ModTime, e.Uid, e.Uname)
				}
			}
		}
	}
	wantNames := []string{m[0].Config, m[0].Layers[0], m[0].Layers[1], "manifest.json"}
	if !reflect.DeepEqual(names, wantNames) {
		t.Errorf("archive entries %v, want %v", names, wantNames)
	}
	wantApp := []string{"app rwxrwxrwx usr/local/bin/app", "home/ rwxr-xr-x ", "home/user/ rwx------ ", "usr/ rwxr-xr-x ", "usr/local/ rwxr-xr-x ", "usr/local/bin/ rwxr-xr-x ", "usr/local/bin/app rwxr-xr-x "}
	if !reflect.DeepEqual(app, wantApp) {
		t.Errorf("layer entries:\n%s\nwant:\n%s", strings.Join(app, "\n"), strings.Join(wantApp, "\n"))
	}
}

func TestBuildsAreByteIdentical(t *testing.T) {
	var sums []string
	for range 2 {
		dir := t.TempDir()
		archive := filepath.Join(dir, "tiny.tar")
		if err := WriteArchive(archive, tinyImage(t, dir), "example.com/a:1", "example.com/b:2", "example.com/c:3"); err != nil {
			t.Fatal(err)
		}
		sum, err := FileSHA256(archive)
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, sum)
	}
	if sums[0] != sums[1] {
		t.Errorf("two builds of the same image differ: %s, %s", sums[0], sums[1])
	}
}

func TestStickyTmp(t *testing.T) {
	l := NewLayer("")
	l.Dir("tmp", 0o777|os.ModeSticky)
	var buf bytes.Buffer
	if err := l.WriteTar(&buf); err != nil {
		t.Fatal(err)
	}
	h, err := tar.NewReader(&buf).Next()
	if err != nil {
		t.Fatal(err)
	}
	if h.Name != "tmp/" || h.Mode != 0o1777 {
		t.Errorf("got %s mode %o, want tmp/ 1777", h.Name, h.Mode)
	}
}

func TestParsePins(t *testing.T) {
	sha := strings.Repeat("ab", 32)
	good := "# header\n\ncurl 7.88.1-10+deb12u15 " + sha + " userland  # curl\nlibc6 2.36 " + sha + " userland,iptables # glibc\n"
	pins, err := ParsePins(strings.NewReader(good), "pins.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(pins) != 2 || pins[1].Name != "libc6" || !reflect.DeepEqual(pins[1].Sets, []string{"userland", "iptables"}) || pins[0].Comment != "curl" || pins[1].Line != 4 {
		t.Errorf("pins %+v", pins)
	}
	if got := InSet(pins, "iptables"); len(got) != 1 || got[0].Name != "libc6" {
		t.Errorf("InSet(iptables) = %+v", got)
	}
	for name, tc := range map[string]struct{ in, want string }{
		"no comment":   {"curl 1 " + sha + " userland\n", "pins.txt:1: a pin needs a comment"},
		"fields":       {"curl 1 userland # x\n", "pins.txt:1: want `NAME VERSION SHA256 SETS"},
		"short hash":   {"curl 1 abcd userland # x\n", `pins.txt:1: "abcd" is not a SHA256`},
		"pinned twice": {"curl 1 " + sha + " userland # x\ncurl 2 " + sha + " userland # y\n", "pins.txt:2: package curl is already pinned on line 1"},
	} {
		if _, err := ParsePins(strings.NewReader(tc.in), "pins.txt"); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", name, err, tc.want)
		}
	}
}

func TestRepoPinFileParses(t *testing.T) {
	f, err := os.Open("../../images/debian-packages.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	pins, err := ParsePins(f, "debian-packages.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, set := range []string{"userland", "iptables", "cacerts"} {
		if len(InSet(pins, set)) == 0 {
			t.Errorf("no package in set %s", set)
		}
	}
}

func TestCheckLibraries(t *testing.T) {
	// A dynamically linked host binary without its libraries is refused, naming them.
	ls := "/bin/ls"
	if _, err := os.Stat(ls); err != nil {
		t.Skip("no /bin/ls")
	}
	l := NewLayer("")
	l.CopyFile("bin/ls", 0o755, ls)
	err := CheckLibraries(l)
	if err == nil || !strings.Contains(err.Error(), "/bin/ls: libc.so.6") || !strings.Contains(err.Error(), "/bin/ls: interpreter /lib64/ld-linux-x86-64.so.2") {
		t.Errorf("CheckLibraries without libraries: %v", err)
	}
	// With the libraries it needs (symlinks count), it passes.
	libs := NewLayer("")
	for _, lib := range []string{"libc.so.6", "libselinux.so.1", "libpcre2-8.so.0"} {
		libs.File("usr/lib/x86_64-linux-gnu/"+lib, 0o644, nil)
		libs.Symlink("lib/x86_64-linux-gnu/"+lib, "../../usr/lib/x86_64-linux-gnu/"+lib)
	}
	libs.Symlink("lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/libc.so.6")
	if err := CheckLibraries(libs, l); err != nil {
		t.Errorf("with the libraries Debian's ls needs: %v", err)
	}
	// Files that are not ELF need nothing.
	st := NewLayer("")
	st.File("etc/hosts", 0o644, []byte("127.0.0.1 localhost\n"))
	if err := CheckLibraries(st); err != nil {
		t.Errorf("plain files: %v", err)
	}
}
