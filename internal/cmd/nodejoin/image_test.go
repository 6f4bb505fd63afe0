package nodejoin

import (
	"bytes"
	"testing"

	"github.com/nodejoin/nodejoin/internal/sandbox"
	"github.com/nodejoin/nodejoin/internal/sandbox/instance"
)

var testImageNodes = []sandbox.NodeImages{
	{Node: "ip-198-18-0-11.local.internal", Instance: "i-0123456789abcdef0", Kubelet: "real", Images: []instance.Image{
		{Name: "example.com/app:v1", Digest: "sha256:5192bdbb8cbd2b33e8773eb3ebcf7cf38b5f57090546483f5f6898093e2030b4", Size: "1.1 MiB"},
		{Name: "registry.k8s.io/pause:3.10.2", Digest: "sha256:13a527c696403bd8df7ce95686a666693dc7e09a19c621aa9e0968285f62b260", Size: "688.4 KiB"},
	}, Loaded: []string{"/state/nodejoin/demo/images/000-app.tar"}},
	{Node: "ip-198-18-0-12.local.internal", Instance: "i-0fedcba9876543210", Kubelet: "sim", Skipped: "simulated kubelet: no containerd"},
	{Node: "ip-198-18-0-13.local.internal", Instance: "i-0aaaaaaaaaaaaaaaa", Kubelet: "real",
		Error: "importing image archive /state/nodejoin/demo/images/000-app.tar: ctr images import: exit status 1: ctr: unrecognized image format"},
}

func TestImageOutput(t *testing.T) {
	var list, load, js, none bytes.Buffer
	printImageList(&list, "demo", testImageNodes)
	golden(t, "image-list.txt", list.String())
	printImageLoad(&load, "demo", []string{"/home/me/app.tar"}, testImageNodes)
	golden(t, "image-load.txt", load.String())
	if err := printStructured(&js, outputJSON, testImageNodes); err != nil {
		t.Fatal(err)
	}
	golden(t, "image-list.json", js.String())
	printImageList(&none, "demo", nil)
	golden(t, "image-list-empty.txt", none.String())
}

func TestImageCommandsNeedArchivesAndNoArgs(t *testing.T) {
	for _, args := range [][]string{{"image", "load", "--name", "x"}, {"image", "list", "--name", "x", "extra"}, {"image", "list", "-o", "xml"}} {
		var out, errOut bytes.Buffer
		if err := Run(t.Context(), args, &out, &errOut); err == nil {
			t.Errorf("nodejoin %v succeeded, want a usage error", args)
		}
	}
}
