package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodejoin/nodejoin/internal/imagebuild"
)

// conformanceDir is the subdirectory of the output that holds the images only upstream's
// conformance tests use. Nodes do not import it at launch (it would slow every cluster's
// start); the conformance runner loads it into its cluster (test/conformance, -images).
const conformanceDir = "conformance"

// conformancePins is the pin file of the packages only the conformance images use.
const conformancePins = "hack/images/conformance-packages.txt"

// mergePins adds extra's pins to base. A package pinned in both must have the same
// version and SHA256 in both (one package file backs both), and gets the union of sets.
func mergePins(base, extra []imagebuild.Pin) ([]imagebuild.Pin, error) {
	out := append([]imagebuild.Pin(nil), base...)
	for _, p := range extra {
		i := -1
		for j := range out {
			if out[j].Name == p.Name {
				i = j
			}
		}
		if i < 0 {
			out = append(out, p)
			continue
		}
		if out[i].Version != p.Version || out[i].SHA256 != p.SHA256 {
			return nil, fmt.Errorf("package %s is pinned as %s (sha256 %s) and as %s (sha256 %s): pin one version in both files",
				p.Name, out[i].Version, out[i].SHA256, p.Version, p.SHA256)
		}
		sets := append([]string(nil), out[i].Sets...)
		for _, s := range p.Sets {
			if !contains(sets, s) {
				sets = append(sets, s)
			}
		}
		out[i].Sets = sets
	}
	return out, nil
}

// loadPins reads the pin file and the conformance images' one (extra; "" for the one
// of this module) into one list.
func loadPins(pinFile, extra, root string) ([]imagebuild.Pin, error) {
	pins, err := parsePinFile(pinFile)
	if err != nil {
		return nil, err
	}
	if extra == "" {
		extra = filepath.Join(root, conformancePins)
	}
	more, err := parsePinFile(extra)
	if err != nil {
		return nil, err
	}
	if pins, err = mergePins(pins, more); err != nil {
		return nil, fmt.Errorf("%s and %s: %w", pinFile, extra, err)
	}
	return pins, nil
}

// conformanceInputs builds the binaries the conformance images are made of (and the
// busybox binary, which the built-in busybox image has too) into the
// builder's scratch directory (sample-apiserver only when wanted: it links for seconds)
// and returns the images.
func conformanceInputs(ctx context.Context, b *builder, root, only string) ([]image, error) {
	var err error
	if b.busybox, err = b.busyboxFor(ctx, only); err != nil {
		return nil, err
	}
	nnp := filepath.Join(b.scratch, "nnp")
	if err := goBuild(ctx, nnp, "", "github.com/nodejoin/nodejoin/hack/images/nnp"); err != nil {
		return nil, err
	}
	sample := filepath.Join(b.scratch, "sample-apiserver")
	if only == "" || contains(strings.Split(only, ","), "sample-apiserver") {
		if err := buildSampleAPIServer(ctx, root, sample); err != nil {
			return nil, err
		}
	}
	k8s, err := kubernetesSource(ctx, root)
	if err != nil {
		return nil, err
	}
	return conformanceImages(b.bin, nnp, sample, filepath.Join(root, "hack", "images", "nginx.conf"), k8s, b.busybox), nil
}

func parsePinFile(path string) ([]imagebuild.Pin, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	return imagebuild.ParsePins(f, path)
}

// moduleRoot returns the directory of this module (go env GOMOD), which holds the
// files the images are built from wherever the builder runs (its tests run in
// hack/images).
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the nodejoin module (go env GOMOD is empty)")
	}
	return filepath.Dir(mod), nil
}

// kubernetesSource returns the directory of the pinned k8s.io/kubernetes module (the one
// hack/tools builds e2e.test from), whose test/images holds the data files of the update
// demo's images.
func kubernetesSource(ctx context.Context, root string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes")
	cmd.Dir = filepath.Join(root, "hack", "tools")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locating the pinned k8s.io/kubernetes source (go list -m in hack/tools): %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// buildSampleAPIServer builds k8s.io/sample-apiserver of the pinned release (hack/tools
// pins every staging module to k8s.io/kubernetes's version) into out, static.
func buildSampleAPIServer(ctx context.Context, root, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, "k8s.io/sample-apiserver")
	cmd.Dir = filepath.Join(root, "hack", "tools")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64", "GOFLAGS=-mod=readonly")
	if o, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build k8s.io/sample-apiserver (hack/tools): %w: %s", err, strings.TrimSpace(string(o)))
	}
	return nil
}

// busyboxLayer is the busybox image's only layer: the base of the images upstream builds
// on busybox (nonewprivs) and the shell of the nginx images. Its applets are all in /bin,
// as in upstream's busybox image.
func (b *builder) busyboxLayer() (*imagebuild.Layer, error) {
	l := imagebuild.NewLayer("busybox 1.37.0 (upstream's source, static) with its applet links in /bin")
	l.CopyFile("bin/busybox", 0o755, b.busybox)
	if err := busyboxApplets(l, true, b.busybox); err != nil {
		return nil, err
	}
	baseFiles(l, "", "")
	return l, nil
}

// conformanceImages are the images only conformance tests use, each under the names
// `e2e.test --list-images` gives (docs/conformance.md says which test uses which).
func conformanceImages(binDir, nnp, sampleAPIServer, nginxConf, k8sSource, busybox string) []image {
	demo := func(name string) image {
		html := filepath.Join(k8sSource, "test", "images", name, "html")
		return image{
			// The update demo's images: agnhost's test-webserver serving <name>.jpg and
			// data.json ({"image": "<name>.jpg"}, which the test reads through the pod
			// proxy) from /, as upstream's Dockerfiles lay them out.
			name: name, dir: conformanceDir,
			refs: []string{"registry.k8s.io/e2e-test-images/" + name + ":1.8"},
			inputs: map[string]string{
				"agnhost": filepath.Join(binDir, "agnhost"), name + ".jpg": filepath.Join(html, name+".jpg"),
				"data.json": filepath.Join(html, "data.json"),
			},
			sets: []string{"userland"},
			config: v1.Config{
				Entrypoint: []string{"/agnhost"}, Cmd: []string{"test-webserver"}, Env: []string{pathEnv},
				ExposedPorts: map[string]struct{}{"80/tcp": {}},
			},
			layers: func(b *builder) ([]*imagebuild.Layer, error) {
				layers, err := b.agnhostLayers()
				if err != nil {
					return nil, err
				}
				l := imagebuild.NewLayer(name + " 1.8 (k8s.io/kubernetes/test/images/" + name + "/html)")
				l.CopyFile(name+".jpg", 0o644, filepath.Join(html, name+".jpg"))
				l.CopyFile("data.json", 0o644, filepath.Join(html, "data.json"))
				return append(layers, l), nil
			},
		}
	}
	return []image{
		{
			// Upstream's nginx images are nginx on Alpine; the tests only need a server on
			// port 80 that runs until stopped, and a shell for exec hooks. Debian's nginx
			// 1.22 serves under both tags (the tests compare image names, not versions).
			name: "nginx", dir: conformanceDir,
			refs:   []string{"registry.k8s.io/e2e-test-images/nginx:1.27.0-2", "registry.k8s.io/e2e-test-images/nginx:1.28.0-2"},
			inputs: map[string]string{"nginx.conf": nginxConf, "busybox": busybox},
			sets:   []string{"nginx"},
			config: v1.Config{
				Entrypoint: []string{"/usr/sbin/nginx", "-c", "/etc/nginx/nginx.conf"}, Env: []string{pathEnv},
				ExposedPorts: map[string]struct{}{"80/tcp": {}}, StopSignal: "SIGQUIT",
			},
			layers: func(b *builder) ([]*imagebuild.Layer, error) {
				base, err := b.busyboxLayer()
				if err != nil {
					return nil, err
				}
				l, err := b.setLayer("nginx", "nginx 1.22.1 and its libraries from Debian bookworm")
				if err != nil {
					return nil, err
				}
				// Debian's package ships no configuration (nginx-common does, with a
				// postinst): the image's own comes from hack/images/nginx.conf.
				l.CopyFile("etc/nginx/nginx.conf", 0o644, nginxConf)
				l.File("usr/share/nginx/html/index.html", 0o644, []byte("<!DOCTYPE html>\n<title>nginx</title>\n<p>nginx on a nodejoin cluster</p>\n"))
				l.Dir("var/log/nginx", 0o755)
				l.Dir("var/lib/nginx", 0o755)
				return []*imagebuild.Layer{base, l}, nil
			},
		},
		{
			// busybox with a setuid-root nnp (hack/images/nnp): the
			// allowPrivilegeEscalation tests run it as a non-root user and read the
			// effective uid it prints.
			name: "nonewprivs", dir: conformanceDir,
			refs:   []string{"registry.k8s.io/e2e-test-images/nonewprivs:1.4"},
			inputs: map[string]string{"nnp": nnp, "busybox": busybox},
			config: v1.Config{Cmd: []string{"nnp"}, Env: []string{pathEnv}},
			layers: func(b *builder) ([]*imagebuild.Layer, error) {
				base, err := b.busyboxLayer()
				if err != nil {
					return nil, err
				}
				l := imagebuild.NewLayer("nnp, setuid root (hack/images/nnp)")
				l.CopyFile("usr/local/bin/nnp", 0o755|fs.ModeSetuid, nnp)
				return []*imagebuild.Layer{base, l}, nil
			},
		},
		demo("kitten"),
		demo("nautilus"),
		{
			// The aggregated API server of the Aggregator test, from the pinned
			// k8s.io/sample-apiserver; it serves on 443 with the certificate the test
			// mounts. Upstream's image is the same binary on Alpine; nothing else runs.
			name: "sample-apiserver", dir: conformanceDir,
			refs:     []string{"registry.k8s.io/e2e-test-images/sample-apiserver:1.29.2"},
			inputs:   map[string]string{"sample-apiserver": sampleAPIServer},
			optional: "sample-apiserver",
			config:   v1.Config{Entrypoint: []string{"/sample-apiserver"}, Env: []string{pathEnv}},
			layers: func(*builder) ([]*imagebuild.Layer, error) {
				l := imagebuild.NewLayer("sample-apiserver v0.37.1 (k8s.io/sample-apiserver)")
				l.CopyFile("sample-apiserver", 0o755, sampleAPIServer)
				baseFiles(l, "", "")
				return []*imagebuild.Layer{l}, nil
			},
		},
		{
			// The sample-apiserver's storage in the Aggregator test, which runs
			// /usr/local/bin/etcd: the pinned etcd of bin/ (3.6), under the name the
			// test gives (it checks only that the pod runs that image).
			name: "etcd", dir: conformanceDir,
			refs:     []string{"registry.k8s.io/etcd:3.7.0-0"},
			inputs:   map[string]string{"etcd": filepath.Join(binDir, "etcd")},
			optional: "etcd",
			config:   v1.Config{Env: []string{pathEnv}, ExposedPorts: map[string]struct{}{"2379/tcp": {}, "2380/tcp": {}}},
			layers: func(*builder) ([]*imagebuild.Layer, error) {
				l := imagebuild.NewLayer("etcd (bin/etcd, hack/tools/etcd)")
				l.CopyFile("usr/local/bin/etcd", 0o755, filepath.Join(binDir, "etcd"))
				baseFiles(l, "", "")
				l.Dir("var/lib/etcd", 0o700)
				return []*imagebuild.Layer{l}, nil
			},
		},
	}
}
