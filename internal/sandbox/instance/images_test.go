package instance

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodejoin/nodejoin/internal/imagebuild"
)

func TestParseImageList(t *testing.T) {
	out := `REF                                                                                                   TYPE                                                 DIGEST                                                                  SIZE      PLATFORMS   LABELS
registry.k8s.io/pause:3.10.2                                                                          application/vnd.docker.distribution.manifest.v2+json sha256:13a527c696403bd8df7ce95686a666693dc7e09a19c621aa9e0968285f62b260 688.4 KiB linux/amd64 io.cri-containerd.image=managed
registry.k8s.io/pause@sha256:13a527c696403bd8df7ce95686a666693dc7e09a19c621aa9e0968285f62b260         application/vnd.docker.distribution.manifest.v2+json sha256:13a527c696403bd8df7ce95686a666693dc7e09a19c621aa9e0968285f62b260 688.4 KiB linux/amd64 -
example.com/app:v1                                                                                    application/vnd.docker.distribution.manifest.v2+json sha256:5192bdbb8cbd2b33e8773eb3ebcf7cf38b5f57090546483f5f6898093e2030b4 1.1 MiB   linux/amd64 -
sha256:1540fd6a143866dac57ad62dc4ab6f59f68988527529debce590d82b987dee2c                               application/vnd.docker.distribution.manifest.v2+json sha256:5192bdbb8cbd2b33e8773eb3ebcf7cf38b5f57090546483f5f6898093e2030b4 1.1 MiB   linux/amd64 io.cri-containerd.image=managed
`
	got, err := parseImageList(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []Image{
		{Name: "example.com/app:v1", Digest: "sha256:5192bdbb8cbd2b33e8773eb3ebcf7cf38b5f57090546483f5f6898093e2030b4", Size: "1.1 MiB"},
		{Name: "registry.k8s.io/pause:3.10.2", Digest: "sha256:13a527c696403bd8df7ce95686a666693dc7e09a19c621aa9e0968285f62b260", Size: "688.4 KiB"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if got, err := parseImageList("REF TYPE DIGEST SIZE PLATFORMS LABELS\n"); err != nil || len(got) != 0 {
		t.Errorf("empty list: %v, %v", got, err)
	}
	if _, err := parseImageList("something else\n"); err == nil {
		t.Error("output without a header parsed")
	}
}

// TestImportArchiveIntoContainerd imports a tiny image archive into a throwaway
// containerd (its own root, state and socket) and finds it under its tags.
func TestImportArchiveIntoContainerd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts containerd")
	}
	if os.Geteuid() != 0 {
		t.Skip("containerd needs root")
	}
	containerd, err := exec.LookPath("containerd")
	if err != nil {
		t.Skip("containerd is not installed (make deps)")
	}
	if _, err := exec.LookPath("ctr"); err != nil {
		t.Skip("ctr is not installed (make deps)")
	}
	dir := t.TempDir()
	l := imagebuild.NewLayer("test")
	l.File("hello.txt", 0o644, []byte("hello\n"))
	img, err := imagebuild.Build(imagebuild.Image{Layers: []*imagebuild.Layer{l}, Config: v1.Config{Cmd: []string{"/hello"}}}, dir)
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "test.tar")
	if err := imagebuild.WriteArchive(archive, img, "example.com/nodejoin/test:v1", "example.com/nodejoin/test:also"); err != nil {
		t.Fatal(err)
	}
	c, err := StartContainerd(t.Context(), containerd, filepath.Join(dir, "root"), filepath.Join(dir, "state"), filepath.Join(dir, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if err := ImportArchive(t.Context(), c.Socket, archive); err != nil {
		t.Fatal(err)
	}
	got, err := ListImages(t.Context(), c.Socket)
	if err != nil {
		t.Fatal(err)
	}
	// containerd writes its own manifest for a docker-save archive: both tags name it.
	var names []string
	for _, i := range got {
		names = append(names, i.Name)
		if i.Digest == "" || i.Digest != got[0].Digest {
			t.Errorf("%s has digest %q, want the same as %s (%s)", i.Name, i.Digest, got[0].Name, got[0].Digest)
		}
	}
	if want := []string{"example.com/nodejoin/test:also", "example.com/nodejoin/test:v1"}; !reflect.DeepEqual(names, want) {
		t.Errorf("images %v, want %v", names, want)
	}
	if err := ImportArchive(t.Context(), c.Socket, filepath.Join(dir, "missing.tar")); err == nil {
		t.Error("importing a missing archive succeeded")
	}
	bad := filepath.Join(dir, "bad.tar")
	if err := os.WriteFile(bad, []byte("not an archive"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ImportArchive(t.Context(), c.Socket, bad); err == nil {
		t.Error("importing a broken archive succeeded")
	}
}

// TestImportNetagentImage imports aws-node's image as a node does at launch, when
// `make images` has built it into bin/images/.
func TestImportNetagentImage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts containerd")
	}
	archive, err := filepath.Abs("../../../bin/images/nodejoin-netagent.tar")
	if err != nil {
		t.Fatal(err)
	}
	if v := os.Getenv("NODEJOIN_NETAGENT_IMAGE_ARCHIVE"); v != "" {
		archive = v
	}
	if _, err := os.Stat(archive); err != nil { //nolint:gosec // G703: the test's own archive, or one the developer names.
		t.Skipf("no netagent image (make images builds it): %v", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("containerd needs root")
	}
	containerd, err := exec.LookPath("containerd")
	if err != nil {
		t.Skip("containerd is not installed (make deps)")
	}
	dir := t.TempDir()
	c, err := StartContainerd(t.Context(), containerd, filepath.Join(dir, "root"), filepath.Join(dir, "state"), filepath.Join(dir, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if err := ImportArchive(t.Context(), c.Socket, archive); err != nil {
		t.Fatal(err)
	}
	got, err := ListImages(t.Context(), c.Socket)
	if err != nil {
		t.Fatal(err)
	}
	// addons.DefaultAWSNodeImage; hack/images' tests check the two agree.
	const want = "nodejoin.io/nodejoin-netagent:dev"
	if len(got) != 1 || got[0].Name != want {
		t.Fatalf("images %+v, want %s (aws-node's)", got, want)
	}
}
