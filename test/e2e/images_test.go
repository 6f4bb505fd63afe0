package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodejoin/nodejoin/internal/imagebuild"
	"github.com/nodejoin/nodejoin/internal/sandbox"
)

// podManifest is a pod pinned to node (the scheduler is not needed) that never pulls.
func podManifest(name, node, image string, command ...string) string {
	cmd := ""
	if len(command) > 0 {
		cmd = fmt.Sprintf("    command: [%q]\n", strings.Join(command, `", "`))
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  nodeName: %s
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: %s
    imagePullPolicy: Never
%s`, name, node, image, cmd)
}

// The built-in images are in every node's containerd from its launch; an archive
// loaded into the running cluster reaches its node; pods run from all of them without
// a registry, and agnhost has the userland upstream's tests exec into.
func TestImagesLoadAndRunOnARealNode(t *testing.T) {
	requireRealKubelets(t)
	c := newCLI(t)
	for _, img := range []string{"pause", "agnhost"} {
		if _, err := os.Stat(filepath.Join(c.binDir, "images", img+".tar")); err != nil {
			t.Skipf("bin/images/%s.tar is missing (make images)", img)
		}
	}
	name := "e2e-images"
	ifaces := hostInterfaces(t)
	t.Cleanup(func() { _ = c.command("down", "--name", name).Run() })

	// A small image of the test's own: the pause program under another name.
	dir := t.TempDir()
	prog := filepath.Join(dir, "hello")
	build := exec.CommandContext(t.Context(), "go", "build", "-trimpath", "-o", prog, "github.com/nodejoin/nodejoin/images/pause")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the test image's program: %v\n%s", err, out)
	}
	l := imagebuild.NewLayer("e2e")
	l.CopyFile("hello", 0o755, prog)
	img, err := imagebuild.Build(imagebuild.Image{Layers: []*imagebuild.Layer{l}, Config: v1.Config{Entrypoint: []string{"/hello"}}}, dir)
	if err != nil {
		t.Fatal(err)
	}
	const helloImage = "example.com/nodejoin/e2e-hello:v1"
	archive := filepath.Join(dir, "hello.tar")
	if err := imagebuild.WriteArchive(archive, img, helloImage); err != nil {
		t.Fatal(err)
	}

	out := c.run("up", "--name", name, "--nodes", "1", "--detach")
	t.Logf("up:\n%s", out)
	if !strings.Contains(out, "images imported") {
		t.Errorf("up output shows no image import step:\n%s", out)
	}
	kubeconfig := strings.TrimSpace(c.run("kubeconfig", "--name", name))
	const node = "ip-198-18-0-11.local.internal"

	out = c.run("image", "load", "--name", name, archive)
	if !strings.Contains(out, node) || !strings.Contains(out, "loaded 1 archive(s)") {
		t.Errorf("image load output:\n%s", out)
	}
	var list []sandbox.NodeImages
	t.Logf("image list:\n%s", c.run("image", "list", "--name", name))
	c.runJSON(false, &list, "image", "list", "--name", name, "-o", "json")
	if len(list) != 1 || list[0].Node != node {
		t.Fatalf("image list: %+v", list)
	}
	var names []string
	for _, i := range list[0].Images {
		names = append(names, i.Name)
	}
	for _, want := range []string{helloImage, "registry.k8s.io/pause:3.10.2", "registry.k8s.io/e2e-test-images/agnhost:2.66.1",
		"registry.k8s.io/e2e-test-images/agnhost:2.55", "registry.k8s.io/e2e-test-images/glibc-dns-testing:2.1.1"} {
		if !slices.Contains(names, want) {
			t.Errorf("node %s lacks %s; it has %v", node, want, names)
		}
	}

	// Until kube-controller-manager runs in every cluster, the default service account
	// may be missing; pods need it to pass admission.
	if out, err := exec.CommandContext(t.Context(), filepath.Join(c.binDir, "kubectl"), "--kubeconfig", kubeconfig,
		"create", "serviceaccount", "default").CombinedOutput(); err != nil && !strings.Contains(string(out), "AlreadyExists") {
		t.Fatalf("creating the default service account: %v\n%s", err, out)
	}
	pods := []string{
		podManifest("hello", node, helloImage),
		podManifest("pause", node, "registry.k8s.io/pause:3.10.2"),
		podManifest("agnhost", node, "registry.k8s.io/e2e-test-images/agnhost:2.66.1"),
	}
	manifest := filepath.Join(dir, "pods.yaml")
	if err := os.WriteFile(manifest, []byte(strings.Join(pods, "---\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	c.kubectl(kubeconfig, "apply", "-f", manifest)
	wait := exec.CommandContext(t.Context(), filepath.Join(c.binDir, "kubectl"), "--kubeconfig", kubeconfig,
		"wait", "--for=condition=Ready", "pod/hello", "pod/pause", "pod/agnhost", "--timeout=240s")
	if out, err := wait.CombinedOutput(); err != nil {
		desc, _ := exec.CommandContext(t.Context(), filepath.Join(c.binDir, "kubectl"), "--kubeconfig", kubeconfig, "describe", "pods").CombinedOutput()
		t.Fatalf("pods did not become Ready: %v\n%s\n%s", err, out, desc)
	}
	got := c.kubectl(kubeconfig, "get", "pods", "-o", "jsonpath={range .items[*]}{.metadata.name}={.status.phase} {end}")
	if got != "agnhost=Running hello=Running pause=Running " {
		t.Errorf("pod phases: %q", got)
	}
	if logs := c.kubectl(kubeconfig, "logs", "agnhost"); !strings.Contains(logs, "Paused") {
		t.Errorf("agnhost's default command is not pause; its log: %q", logs)
	}
	out = c.kubectl(kubeconfig, "exec", "agnhost", "--", "sh", "-c",
		"nc -h 2>&1 | head -n 1; curl --version | head -n 1; dig -v 2>&1; getent hosts localhost; id user-defined-in-image; ls -ld /tmp")
	for _, want := range []string{"OpenBSD netcat", "curl 7.88.1", "DiG 9.18", "localhost", "uid=1000(user-defined-in-image) gid=50000(group-defined-in-image)", "drwxrwxrwt"} {
		if !strings.Contains(out, want) {
			t.Errorf("agnhost's userland: output lacks %q:\n%s", want, out)
		}
	}
	if out := c.kubectl(kubeconfig, "exec", "agnhost", "--", "/agnhost-2", "--version"); !strings.Contains(out, "2.66.1") {
		t.Errorf("/agnhost-2 --version: %q", out)
	}

	c.run("down", "--name", name)
	c.assertNothingLeft(name, ifaces)
}
