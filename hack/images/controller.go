package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodejoin/nodejoin/internal/imagebuild"
)

// The nodejoin-controller image, as the chart (charts/nodejoin-controller) names it by
// default: the static binary as entrypoint, the CA bundle of Debian's ca-certificates,
// a non-root user and nothing else (no shell, no package manager, no C library).
const (
	controllerImage = "nodejoin.io/nodejoin-controller:dev"
	controllerPkg   = "github.com/nodejoin/nodejoin/cmd/nodejoin-controller"
	// controllerUser is distroless' "nonroot", the user the chart's pods run as.
	controllerUser = 65532
	// caBundlePath is where Go's crypto/x509 looks first on Linux.
	caBundlePath = "etc/ssl/certs/ca-certificates.crt"
)

// buildController builds the static controller binary into out: CGO off (no C library
// in the image), -trimpath and an empty build ID, so that the same commit gives the
// same bytes on every machine, and the image key and digest follow.
func buildController(ctx context.Context, out string) error {
	return goBuild(ctx, out, "-buildid=", controllerPkg)
}

func controllerImageSpec(ctrl string) image {
	return image{
		name:     "nodejoin-controller",
		refs:     []string{controllerImage},
		inputs:   map[string]string{"nodejoin-controller": ctrl},
		optional: "nodejoin-controller",
		sets:     []string{"cacerts"},
		config: v1.Config{
			Entrypoint: []string{"/nodejoin-controller"},
			User:       fmt.Sprintf("%d:%d", controllerUser, controllerUser),
			Env:        []string{"SSL_CERT_FILE=/" + caBundlePath},
			WorkingDir: "/",
		},
		layers: func(b *builder) ([]*imagebuild.Layer, error) {
			base, err := b.caCertificatesLayer()
			if err != nil {
				return nil, err
			}
			l := imagebuild.NewLayer("nodejoin-controller (static, cmd/nodejoin-controller)")
			l.CopyFile("nodejoin-controller", 0o755, ctrl)
			return []*imagebuild.Layer{base, l}, nil
		},
	}
}

// caCertificatesLayer is the controller's base: the bundle update-ca-certificates would
// write from Debian's ca-certificates (every Mozilla certificate, in name order, each
// ending in a newline), the users root, nonroot and nobody with no login shell, and a
// sticky /tmp. The package's scripts and the openssl it depends on stay out: the bundle
// is all a Go program reads.
func (b *builder) caCertificatesLayer() (*imagebuild.Layer, error) {
	dir, err := b.deb(context.Background(), "ca-certificates")
	if err != nil {
		return nil, err
	}
	bundle, n, err := caBundle(filepath.Join(dir, "usr/share/ca-certificates/mozilla"))
	if err != nil {
		return nil, err
	}
	var ver string
	for _, p := range imagebuild.InSet(b.pins, "cacerts") {
		if p.Name == "ca-certificates" {
			ver = p.Version
		}
	}
	l := imagebuild.NewLayer(fmt.Sprintf("CA certificates (%d) from Debian's ca-certificates %s; user nonroot (%d)", n, ver, controllerUser))
	l.File(caBundlePath, 0o644, bundle)
	l.File("etc/passwd", 0o644, []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n", controllerUser, controllerUser)))
	l.File("etc/group", 0o644, []byte(fmt.Sprintf("root:x:0:\nnonroot:x:%d:\nnogroup:x:65534:\n", controllerUser)))
	l.Dir("home/nonroot", 0o700)
	l.Dir("tmp", 0o777|os.ModeSticky)
	return l, nil
}

// caBundle concatenates the PEM certificates in dir in name order and counts them;
// a file that is not one parseable certificate fails the build rather than shipping a
// bundle Go would silently skip parts of.
func caBundle(dir string) ([]byte, int, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.crt"))
	if err != nil {
		return nil, 0, err
	}
	sort.Strings(files)
	var buf bytes.Buffer
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, 0, err
		}
		blk, rest := pem.Decode(data)
		if blk == nil || blk.Type != "CERTIFICATE" || len(bytes.TrimSpace(rest)) != 0 {
			return nil, 0, fmt.Errorf("%s: want one PEM certificate", filepath.Base(f))
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			return nil, 0, fmt.Errorf("%s: %w", filepath.Base(f), err)
		}
		buf.Write(data)
		if !bytes.HasSuffix(data, []byte("\n")) {
			buf.WriteByte('\n')
		}
	}
	if len(files) == 0 {
		return nil, 0, fmt.Errorf("no certificate in %s", dir)
	}
	return buf.Bytes(), len(files), nil
}
