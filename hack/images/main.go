// Command images builds the container images local clusters use into bin/images/ (run
// by `make tools`): no image can be pulled on the machines nodejoin runs on, so the pause
// image, agnhost (also tagged as agnhost:2.55 and glibc-dns-testing, which upstream's
// tests use), busybox, kube-proxy, nodejoin-netagent (aws-node), CoreDNS and
// nodejoin-controller (controller.go) are assembled here from the binaries in bin/ and
// from pinned Debian packages (images/debian-packages.txt), and written as docker-save
// archives under their upstream names. Every node's containerd imports them at launch.
//
// Each image is keyed by a hash of its inputs (the binaries' SHA256s, the pins of the
// Debian packages it uses, its tags and configuration, and builderVersion) and cached
// under ~/.cache/nodejoin/images/<key>/, so another checkout copies instead of building.
package main

import (
	"archive/tar"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodejoin/nodejoin/internal/atomicfile"
	"github.com/nodejoin/nodejoin/internal/imagebuild"
)

// builderVersion changes whenever this program lays out an image differently, so that
// cached archives of the old layout are not reused.
const builderVersion = "4"

// The nodejoin-netagent image: its name and layout are the ones aws-node's DaemonSet
// uses (internal/addons; main_test.go checks they agree).
const (
	netagentImage      = "nodejoin.io/nodejoin-netagent:dev"
	netagentPath       = "/usr/local/bin/nodejoin-netagent"
	netagentPluginsDir = "/opt/nodejoin-netagent/cni"
)

const (
	pauseVersion   = "3.10.2"
	agnhostVersion = "2.66.1"
	pathEnv        = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

type builder struct {
	// w receives the progress lines.
	w                        io.Writer
	bin, out, cache, scratch string
	pins                     []imagebuild.Pin
	// extracted holds each Debian package's extracted tree, by name.
	extracted map[string]string
	// busybox is the busybox binary built from source (busybox.go), when an image that
	// has it is to be built.
	busybox string
}

// image is one image to build.
type image struct {
	name string
	// dir is the subdirectory of the output the archive goes to ("": nodes import it at
	// launch; conformanceDir: the conformance runner loads it).
	dir  string
	refs []string
	// inputs are the files the image is built from (hashed into its key); a missing
	// optional input skips the image.
	inputs   map[string]string
	optional string
	sets     []string
	config   v1.Config
	layers   func(b *builder) ([]*imagebuild.Layer, error)
}

func run(ctx context.Context, args []string, w io.Writer) error {
	fl := flag.NewFlagSet("images", flag.ContinueOnError)
	home, _ := os.UserCacheDir()
	bin := fl.String("bin", "bin", "directory with the binaries (agnhost, kube-proxy, coredns)")
	out := fl.String("out", "", "output directory (default BIN/images)")
	cache := fl.String("cache", filepath.Join(home, "nodejoin", "images"), "cache of built archives and downloaded packages ($NODEJOIN_IMAGES_CACHE)")
	pinFile := fl.String("pins", "images/debian-packages.txt", "the pinned Debian packages")
	extraPins := fl.String("conformance-pins", "", "the pinned Debian packages of the conformance images (default: "+conformancePins+" of this module)")
	only := fl.String("only", "", "build only these images (comma-separated names)")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if v := os.Getenv("NODEJOIN_IMAGES_CACHE"); v != "" {
		*cache = v
	}
	if *out == "" {
		*out = filepath.Join(*bin, "images")
	}
	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	pins, err := loadPins(*pinFile, *extraPins, root)
	if err != nil {
		return err
	}
	scratch, err := os.MkdirTemp("", "nodejoin-images-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(scratch) }()
	b := &builder{w: w, bin: *bin, out: *out, cache: *cache, scratch: scratch, pins: pins, extracted: map[string]string{}}
	if err := os.MkdirAll(b.out, 0o755); err != nil { //nolint:gosec // G301: bin/ is readable like the binaries beside it.
		return err
	}

	pause := filepath.Join(scratch, "pause")
	if err := goBuild(ctx, pause, "-X main.version=v"+pauseVersion, "github.com/nodejoin/nodejoin/images/pause"); err != nil {
		return err
	}
	// The controller's binary is an input like pause's, built only when its image is
	// wanted (its link takes seconds).
	ctrl := filepath.Join(scratch, "nodejoin-controller")
	if *only == "" || contains(strings.Split(*only, ","), "nodejoin-controller") {
		if err := buildController(ctx, ctrl); err != nil {
			return err
		}
	}
	conformance, err := conformanceInputs(ctx, b, root, *only)
	if err != nil {
		return err
	}
	imgs := append(images(b, pause), controllerImageSpec(ctrl))
	imgs = append(imgs, conformance...)
	start := time.Now()
	for i, img := range imgs {
		if *only != "" && !contains(strings.Split(*only, ","), img.name) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		prefix := fmt.Sprintf("images: [%d/%d] %s", i+1, len(imgs), img.name)
		if img.optional != "" {
			if _, err := os.Stat(img.inputs[img.optional]); err != nil {
				fmt.Fprintf(w, "%s: skipped: %s is missing (build it first; `make tools` does)\n", prefix, img.inputs[img.optional])
				continue
			}
		}
		if err := b.make(ctx, img, prefix); err != nil {
			return fmt.Errorf("image %s: %w", img.name, err)
		}
	}
	fmt.Fprintf(w, "images: done in %s (%s)\n", time.Since(start).Round(100*time.Millisecond), b.out)
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// make brings out/<name>.tar up to date: kept when its key stamp matches, copied from
// the cache, or built (and then cached).
func (b *builder) make(ctx context.Context, img image, prefix string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	key, err := b.key(img)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(b.out, img.dir), 0o755); err != nil { //nolint:gosec // G301: like bin/images.
		return err
	}
	dst := filepath.Join(b.out, img.dir, img.name+".tar")
	stamp := filepath.Join(b.out, img.dir, "."+img.name+".key")
	if got, err := os.ReadFile(stamp); err == nil && strings.TrimSpace(string(got)) == key {
		if _, err := os.Stat(dst); err == nil {
			fmt.Fprintf(b.w, "%s: up to date (key %s)\n", prefix, key)
			return nil
		}
	}
	_ = os.Remove(stamp)
	cached := filepath.Join(b.cache, key, img.name+".tar")
	start := time.Now()
	if _, err := os.Stat(cached); err == nil {
		if err := atomicfile.Copy(cached, dst, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(b.w, "%s: copied from %s in %s\n", prefix, cached, time.Since(start).Round(100*time.Millisecond))
		return atomicfile.WriteFile(stamp, []byte(key+"\n"), 0o644)
	}
	fmt.Fprintf(b.w, "%s: building %s\n", prefix, strings.Join(img.refs, ", "))
	layers, err := img.layers(b)
	if err != nil {
		return err
	}
	if err := imagebuild.CheckLibraries(layers...); err != nil {
		return err
	}
	dir, err := os.MkdirTemp(b.scratch, img.name+"-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	built, err := imagebuild.Build(imagebuild.Image{Layers: layers, Config: img.config}, dir)
	if err != nil {
		return err
	}
	if err := imagebuild.WriteArchive(dst, built, img.refs...); err != nil {
		return err
	}
	id, err := built.ConfigName()
	if err != nil {
		return err
	}
	st, err := os.Stat(dst)
	if err != nil {
		return err
	}
	fmt.Fprintf(b.w, "%s: built in %s: %.1f MB, image ID %s\n", prefix, time.Since(start).Round(100*time.Millisecond), float64(st.Size())/1e6, id)
	if err := os.MkdirAll(filepath.Dir(cached), 0o755); err == nil { //nolint:gosec // G301: a cache of public images, like the tools cache.
		if err := atomicfile.Copy(dst, cached, 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "images: warning: caching %s: %v\n", cached, err)
		}
	}
	return atomicfile.WriteFile(stamp, []byte(key+"\n"), 0o644)
}

// key hashes what the image is built from.
func (b *builder) key(img image) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "builder %s\nimage %s\nrefs %s\n", builderVersion, img.name, strings.Join(img.refs, ","))
	cfg, err := json.Marshal(img.config)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(h, "config %s\n", cfg)
	labels := make([]string, 0, len(img.inputs))
	for l := range img.inputs {
		labels = append(labels, l)
	}
	sort.Strings(labels)
	for _, l := range labels {
		sum, err := imagebuild.FileSHA256(img.inputs[l])
		if err != nil {
			return "", fmt.Errorf("input %s: %w", l, err)
		}
		fmt.Fprintf(h, "input %s %s\n", l, sum)
	}
	for _, set := range img.sets {
		for _, p := range imagebuild.InSet(b.pins, set) {
			fmt.Fprintf(h, "deb %s %s %s %s\n", set, p.Name, p.Version, p.SHA256)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// goBuild builds a static binary of pkg (a package of this module) into out.
func goBuild(ctx context.Context, out, ldflags, pkg string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w "+ldflags, "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if o, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w: %s", pkg, err, strings.TrimSpace(string(o)))
	}
	return nil
}

// deb returns the directory holding pinned package name's files, fetching and
// extracting it on first use.
func (b *builder) deb(ctx context.Context, name string) (string, error) {
	if d, ok := b.extracted[name]; ok {
		return d, nil
	}
	for _, p := range b.pins {
		if p.Name != name {
			continue
		}
		deb, err := imagebuild.Fetch(ctx, p, filepath.Join(b.cache, "debs"))
		if err != nil {
			return "", err
		}
		dir := filepath.Join(b.scratch, "debs", name)
		if err := imagebuild.Extract(ctx, deb, dir); err != nil {
			return "", err
		}
		b.extracted[name] = dir
		return dir, nil
	}
	return "", fmt.Errorf("package %s is not pinned in the pin file", name)
}

// skipDocs keeps documentation, manual pages and translations out of images.
func skipDocs(rel string, _ fs.DirEntry) bool {
	for _, p := range []string{"usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale", "usr/share/lintian", "usr/share/bug"} {
		if rel == p || strings.HasPrefix(rel, p+"/") {
			return true
		}
	}
	return false
}

// setLayer is a layer with the files of every package pinned in set.
func (b *builder) setLayer(set, comment string) (*imagebuild.Layer, error) {
	l := imagebuild.NewLayer(comment)
	pins := imagebuild.InSet(b.pins, set)
	if len(pins) == 0 {
		return nil, fmt.Errorf("no package is pinned for set %q", set)
	}
	for _, p := range pins {
		dir, err := b.deb(context.Background(), p.Name)
		if err != nil {
			return nil, err
		}
		if err := l.AddTree(dir, skipDocs); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// busyboxApplets links every applet of the busybox binary at bin to /bin/busybox (see
// appletPaths).
func busyboxApplets(l *imagebuild.Layer, flat bool, bin string) error {
	out, err := exec.CommandContext(context.Background(), bin, "--list-full").Output()
	if err != nil {
		return fmt.Errorf("listing busybox applets: %w", err)
	}
	for _, p := range appletPaths(strings.Fields(string(out)), flat, l.Has) {
		l.Symlink(p, "/bin/busybox")
	}
	return nil
}

// appletPaths returns where the applets of `busybox --list-full` are linked: at the paths
// Debian gives them and, flat, in /bin as well, where upstream's busybox image has every
// applet (conformance tests run /bin/sysctl, which Debian puts in /sbin). An applet is
// left out where the layer already has a command of its name in a PATH directory (has):
// nc stays netcat-openbsd's.
func appletPaths(applets []string, flat bool, has func(string) bool) []string {
	var paths []string
	seen := map[string]bool{}
	for _, applet := range applets {
		base := path.Base(applet)
		taken := seen[base]
		for _, d := range []string{"bin", "sbin", "usr/bin", "usr/sbin", "usr/local/bin"} {
			if has(path.Join(d, base)) {
				taken = true
			}
		}
		if taken {
			continue
		}
		seen[base] = true
		paths = append(paths, applet)
		if flat && path.Dir(applet) != "bin" {
			paths = append(paths, path.Join("bin", base))
		}
	}
	return paths
}

// baseFiles are what a root filesystem needs beyond its packages: users and groups
// (root, nobody and extra), name service order, and a world-writable /tmp.
func baseFiles(l *imagebuild.Layer, extraUsers, extraGroups string) {
	l.File("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\n"+extraUsers+"nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"))
	l.File("etc/group", 0o644, []byte("root:x:0:\n"+extraGroups+"nogroup:x:65534:\n"))
	l.File("etc/nsswitch.conf", 0o644, []byte("passwd: files\ngroup: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n"))
	l.Dir("root", 0o700)
	l.Dir("tmp", 0o777|fs.ModeSticky)
}

func images(b *builder, pause string) []image {
	bin := func(n string) string { return filepath.Join(b.bin, n) }
	return []image{
		{
			name:   "pause",
			refs:   []string{"registry.k8s.io/pause:" + pauseVersion},
			inputs: map[string]string{"pause": pause},
			config: v1.Config{Entrypoint: []string{"/pause"}, User: "65535:65535", Env: []string{pathEnv}},
			layers: func(*builder) ([]*imagebuild.Layer, error) {
				l := imagebuild.NewLayer("pause " + pauseVersion + " (images/pause)")
				l.CopyFile("pause", 0o755, pause)
				return []*imagebuild.Layer{l}, nil
			},
		},
		{
			name: "agnhost",
			refs: []string{
				"registry.k8s.io/e2e-test-images/agnhost:" + agnhostVersion,
				// Upstream's tests use agnhost:2.55 as the previous version and compare only
				// image names, and glibc-dns-testing for the glibc half of the DNS tests:
				// this Debian (glibc) based agnhost serves as both.
				"registry.k8s.io/e2e-test-images/agnhost:2.55",
				"registry.k8s.io/e2e-test-images/glibc-dns-testing:2.1.1",
			},
			inputs: map[string]string{"agnhost": bin("agnhost")},
			sets:   []string{"userland"},
			config: v1.Config{
				Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"}, Env: []string{pathEnv},
				ExposedPorts: map[string]struct{}{"80/tcp": {}, "8080/tcp": {}, "8081/tcp": {}, "9376/tcp": {}, "5000/tcp": {}},
			},
			layers: func(b *builder) ([]*imagebuild.Layer, error) { return b.agnhostLayers() },
		},
		{
			name:   "busybox",
			refs:   []string{"registry.k8s.io/e2e-test-images/busybox:1.37.0-2", "docker.io/library/busybox:1.37.0"},
			inputs: map[string]string{"busybox": b.busybox},
			config: v1.Config{Cmd: []string{"sh"}, Env: []string{pathEnv}},
			layers: func(b *builder) ([]*imagebuild.Layer, error) {
				l, err := b.busyboxLayer()
				if err != nil {
					return nil, err
				}
				return []*imagebuild.Layer{l}, nil
			},
		},
		{
			name:   "kube-proxy",
			refs:   []string{"registry.k8s.io/kube-proxy:v1.37.1"},
			inputs: map[string]string{"kube-proxy": bin("kube-proxy")},
			sets:   []string{"iptables"},
			config: v1.Config{Env: []string{pathEnv}},
			layers: func(b *builder) ([]*imagebuild.Layer, error) {
				base, err := b.iptablesBase()
				if err != nil {
					return nil, err
				}
				l := imagebuild.NewLayer("kube-proxy v1.37.1 (k8s.io/kubernetes/cmd/kube-proxy)")
				l.CopyFile("usr/local/bin/kube-proxy", 0o755, bin("kube-proxy"))
				return []*imagebuild.Layer{base, l}, nil
			},
		},
		{
			// aws-node's image (internal/addons): the netagent, and the CNI plugins its
			// init container copies onto nodes. The binaries come from bin/ (`make
			// build-netagent`, static), loopback and portmap from hack/tools/cniplugins.
			name: "nodejoin-netagent",
			refs: []string{netagentImage},
			inputs: map[string]string{
				"nodejoin-netagent": bin("nodejoin-netagent"), "nodejoin-cni": bin("nodejoin-cni"),
				"loopback": bin("loopback"), "portmap": bin("portmap"),
			},
			optional: "nodejoin-netagent",
			sets:     []string{"iptables"},
			config:   v1.Config{Entrypoint: []string{netagentPath}, Env: []string{pathEnv}},
			layers: func(b *builder) ([]*imagebuild.Layer, error) {
				base, err := b.iptablesBase()
				if err != nil {
					return nil, err
				}
				l := imagebuild.NewLayer("nodejoin-netagent and the CNI plugins nodejoin-cni, loopback and portmap")
				l.CopyFile(strings.TrimPrefix(netagentPath, "/"), 0o755, bin("nodejoin-netagent"))
				for _, p := range []string{"nodejoin-cni", "loopback", "portmap"} {
					l.CopyFile(path.Join(strings.TrimPrefix(netagentPluginsDir, "/"), p), 0o755, bin(p))
				}
				return []*imagebuild.Layer{base, l}, nil
			},
		},
		{
			name:     "coredns",
			refs:     []string{"registry.k8s.io/coredns/coredns:v1.14.6"},
			inputs:   map[string]string{"coredns": bin("coredns")},
			optional: "coredns",
			config: v1.Config{
				Entrypoint: []string{"/coredns"}, Env: []string{pathEnv},
				ExposedPorts: map[string]struct{}{"53/tcp": {}, "53/udp": {}},
			},
			layers: func(*builder) ([]*imagebuild.Layer, error) {
				l := imagebuild.NewLayer("coredns v1.14.6 (hack/tools/coredns)")
				l.CopyFile("coredns", 0o755, bin("coredns"))
				l.File("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"))
				l.File("etc/group", 0o644, []byte("root:x:0:\nnogroup:x:65534:\n"))
				return []*imagebuild.Layer{l}, nil
			},
		},
	}
}

// agnhostLayers are the agnhost image's layers (userland, then agnhost with its files),
// also the base of the update demo's images.
func (b *builder) agnhostLayers() ([]*imagebuild.Layer, error) {
	base, err := b.userland()
	if err != nil {
		return nil, err
	}
	crt, key, err := localhostCert()
	if err != nil {
		return nil, err
	}
	l := imagebuild.NewLayer("agnhost " + agnhostVersion + " (k8s.io/kubernetes/test/images/agnhost)")
	l.CopyFile("agnhost", 0o755, filepath.Join(b.bin, "agnhost"))
	l.Symlink("agnhost-2", "agnhost")
	l.File("localhost.crt", 0o644, crt)
	l.File("localhost.key", 0o644, key)
	l.Dir("uploads", 0o755)
	return []*imagebuild.Layer{base, l}, nil
}

// iptablesBase is the root filesystem of kube-proxy and nodejoin-netagent (the same
// layer, stored once by a node's containerd): iptables with the nft backend.
func (b *builder) iptablesBase() (*imagebuild.Layer, error) {
	base, err := b.setLayer("iptables", "iptables 1.8.9 (nft backend) from Debian bookworm")
	if err != nil {
		return nil, err
	}
	// What Debian's update-alternatives would link: the nft backend, as on the host.
	for _, n := range []string{"iptables", "ip6tables"} {
		for _, s := range []string{"", "-save", "-restore"} {
			base.Symlink("usr/sbin/"+n+s, n+"-nft"+s)
		}
	}
	baseFiles(base, "", "")
	return base, nil
}

// userland is the root filesystem agnhost runs on: the "userland" packages, busybox's
// applets for the rest of a shell's tools, and the users upstream's image has
// (uid 1000 in gid 50000, for the supplemental-groups tests).
func (b *builder) userland() (*imagebuild.Layer, error) {
	l, err := b.setLayer("userland", "userland from Debian bookworm: dash, busybox applets, nc, curl, dig, getent")
	if err != nil {
		return nil, err
	}
	// What Debian's update-alternatives and dash's postinst would link. The shell is
	// dash: busybox's sh prefers its own applets to PATH when /proc is mounted, and
	// would run busybox's nc instead of netcat-openbsd's.
	l.Symlink("bin/nc", "nc.openbsd")
	l.Symlink("bin/sh", "dash")
	dir, err := b.deb(context.Background(), "busybox-static")
	if err != nil {
		return nil, err
	}
	if err := busyboxApplets(l, false, filepath.Join(dir, "bin/busybox")); err != nil {
		return nil, err
	}
	baseFiles(l, "user-defined-in-image:x:1000:50000::/home/user-defined-in-image:/bin/sh\n", "group-defined-in-image:x:50000:user-defined-in-image\n")
	if e, ok := l.Lookup("bin/sh"); !ok || e.Type != tar.TypeSymlink || e.Linkname != "dash" {
		return nil, errors.New("userland's /bin/sh is not dash")
	}
	return l, nil
}

// localhostCert is the certificate and key agnhost's porter serves TLS with
// (/localhost.crt and /localhost.key, as upstream's image has). The Ed25519 key comes
// from a fixed seed and Ed25519 signatures are deterministic, so the layer is the same
// on every build; the key is public by construction, as upstream's committed one is: it
// only serves test traffic inside the sandbox.
func localhostCert() (crt, key []byte, err error) {
	seed := sha256.Sum256([]byte("nodejoin agnhost localhost.key"))
	priv := ed25519.NewKeyFromSeed(seed[:])
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "localhost", Organization: []string{"nodejoin test"}},
		NotBefore:             time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:              time.Date(2120, 1, 1, 0, 0, 0, 0, time.UTC),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, priv.Public(), priv)
	if err != nil {
		return nil, nil, fmt.Errorf("agnhost's localhost certificate: %w", err)
	}
	pk, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk}), nil
}
