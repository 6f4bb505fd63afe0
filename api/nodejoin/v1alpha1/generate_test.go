package v1alpha1

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// controllerGenVersion is the controller-gen the generated files come from; the
// Makefile's CONTROLLER_GEN_VERSION.
const controllerGenVersion = "v0.23.0"

// controllerGen returns the pinned controller-gen: bin/controller-gen when it is that
// version, else one installed into a temporary directory through the Go module proxy.
func controllerGen(t *testing.T, root string) string {
	t.Helper()
	bin := filepath.Join(root, "bin", "controller-gen")
	if out, err := exec.CommandContext(t.Context(), bin, "--version").Output(); err == nil && strings.TrimSpace(string(out)) == "Version: "+controllerGenVersion {
		return bin
	}
	gobin := t.TempDir()
	cmd := exec.CommandContext(t.Context(), "go", "install", "sigs.k8s.io/controller-tools/cmd/controller-gen@"+controllerGenVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+gobin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("installing controller-gen %s: %v\n%s", controllerGenVersion, err, out)
	}
	return filepath.Join(gobin, "controller-gen")
}

// The deep copies and the CRD are what controller-gen makes of the types today.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("runs controller-gen")
	}
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	gen := controllerGen(t, root)
	out := t.TempDir()
	cmd := exec.CommandContext(t.Context(), gen, "object", "crd:crdVersions=v1", "paths=./api/nodejoin/v1alpha1/...",
		"output:object:dir="+out, "output:crd:dir="+out)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("controller-gen: %v\n%s", err, b)
	}
	for generated, committed := range map[string][]string{
		"zz_generated.deepcopy.go":           {"zz_generated.deepcopy.go"},
		"nodejoin.io_nodeaccessentries.yaml": {"crds/nodejoin.io_nodeaccessentries.yaml", "../../../deploy/crds/nodejoin.io_nodeaccessentries.yaml"},
		"nodejoin.io_nodegroups.yaml":        {"crds/nodejoin.io_nodegroups.yaml", "../../../deploy/crds/nodejoin.io_nodegroups.yaml"},
	} {
		want, err := os.ReadFile(filepath.Join(out, generated))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range committed {
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s is stale: run make generate", path)
			}
		}
	}
}
