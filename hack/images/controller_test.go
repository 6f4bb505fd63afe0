package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/nodejoin/nodejoin/internal/imagebuild"
)

// Two cold builds of the controller's image (separate image caches, separate output
// directories) give the same archive byte for byte, so the same digest; and the image
// is what the chart's pods rely on: the static binary as entrypoint, run as 65532, a CA
// bundle Go can use, and no shell.
func TestControllerImageIsReproducibleAndMinimal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds nodejoin-controller and fetches ca-certificates with apt-get (about 20 s warm)")
	}
	tmp := t.TempDir()
	var archives [2]string
	for i := range archives {
		dir := filepath.Join(tmp, string(rune('a'+i)))
		var out bytes.Buffer
		err := run(context.Background(), []string{
			"-bin", filepath.Join(dir, "bin"), "-out", filepath.Join(dir, "out"), "-cache", filepath.Join(dir, "cache"),
			"-pins", "../../images/debian-packages.txt", "-only", "nodejoin-controller",
		}, &out)
		if err != nil {
			t.Fatalf("build %d: %v\n%s", i+1, err, out.String())
		}
		archives[i] = filepath.Join(dir, "out", "nodejoin-controller.tar")
	}
	sums := [2]string{}
	for i, a := range archives {
		s, err := imagebuild.FileSHA256(a)
		if err != nil {
			t.Fatal(err)
		}
		sums[i] = s
	}
	if sums[0] != sums[1] {
		t.Fatalf("two builds of the same inputs differ: %s and %s", sums[0], sums[1])
	}

	img, err := tarball.ImageFromPath(archives[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.Config.Entrypoint, " "); got != "/nodejoin-controller" || cfg.Config.User != "65532:65532" {
		t.Errorf("entrypoint %q, user %q; want /nodejoin-controller as 65532:65532", got, cfg.Config.User)
	}
	files := map[string][]byte{}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			data, _ := io.ReadAll(tr)
			files[strings.TrimPrefix(h.Name, "./")] = data
		}
		_ = rc.Close()
	}
	for _, shell := range []string{"bin/sh", "bin/bash", "bin/dash", "bin/busybox", "usr/bin/sh"} {
		if _, ok := files[shell]; ok {
			t.Errorf("the image has %s", shell)
		}
	}
	bin, ok := files["nodejoin-controller"]
	if !ok || !bytes.HasPrefix(bin, []byte("\x7fELF")) {
		t.Fatal("no /nodejoin-controller ELF binary in the image")
	}
	if bytes.Contains(bin, []byte("/lib64/ld-linux")) {
		t.Error("the controller binary names a dynamic loader: it is not static")
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(files[caBundlePath]) || len(pool.Subjects()) < 100 { //nolint:staticcheck // Subjects counts the certificates added.
		t.Errorf("%s holds %d certificates, want Mozilla's (over 100)", caBundlePath, len(pool.Subjects())) //nolint:staticcheck // as above.
	}
	if !strings.Contains(string(files["etc/passwd"]), "nonroot:x:65532:65532:") {
		t.Errorf("etc/passwd has no nonroot user 65532:\n%s", files["etc/passwd"])
	}
}

// A corrupt file in the package's certificate directory fails the build with its name.
func TestCABundleRefusesAFileThatIsNotACertificate(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Broken.crt"), []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := caBundle(dir); err == nil || !strings.Contains(err.Error(), "Broken.crt") {
		t.Errorf("caBundle = %v, want an error naming Broken.crt", err)
	}
	if _, _, err := caBundle(t.TempDir()); err == nil {
		t.Error("an empty directory gave a bundle")
	}
}
