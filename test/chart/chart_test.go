// Package chart tests charts/nodejoin-controller with the pinned helm (bin/helm, built
// by `make tools`): helm lint and helm template of every mode against golden files,
// the schema's and the templates' refusals, the least-power defaults, and deploy/,
// which is rendered from the chart (`make generate` rewrites it and the golden files
// with -update).
package chart

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite deploy/ and the golden files from the chart")

const (
	chartDir  = "../../charts/nodejoin-controller"
	release   = "nodejoin"
	namespace = "nodejoin-system"
	// kubeVersion is the cluster version renderings assume: helm's own default depends on
	// how it was built (its Makefile stamps it from client-go), so it is given.
	kubeVersion = "v1.37.1"
)

// modes are the chart's modes, each a values file under ci/ and a golden rendering
// under testdata/.
var modes = []string{"approver", "webhook", "addons", "nodegroups", "hostnetwork"}

// helm returns the pinned helm: $HELM when set, else bin/helm. Without it the tests
// are skipped in -short mode and fail otherwise.
func helm(t *testing.T) string {
	t.Helper()
	if h := os.Getenv("HELM"); h != "" {
		return h
	}
	h, err := filepath.Abs("../../bin/helm")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(h); err != nil {
		if testing.Short() {
			t.Skipf("bin/helm is missing (run `make tools` or hack/build-tools.sh helm): %v", err)
		}
		t.Fatalf("bin/helm is missing: run `make tools` (or hack/build-tools.sh helm): %v", err)
	}
	return h
}

// run runs helm and returns its standard output, standard error and exit code.
func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), helm(t), args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("helm %v: %v", args, err)
	}
	return o.String(), e.String(), code
}

// render runs helm template with args and fails the test on an error.
func render(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := run(t, append([]string{"template", release, chartDir, "--namespace", namespace, "--kube-version", kubeVersion}, args...)...)
	if code != 0 {
		t.Fatalf("helm template %v: exit %d: %s", args, code, errOut)
	}
	return out
}

func values(mode string) string { return filepath.Join(chartDir, "ci", mode+"-values.yaml") }

// squeeze drops empty lines: Helm 4 ends each rendered document with one, Helm 3 does
// not, and the chart is for both.
func squeeze(b []byte) []byte {
	for bytes.Contains(b, []byte("\n\n")) {
		b = bytes.ReplaceAll(b, []byte("\n\n"), []byte("\n"))
	}
	return b
}

// golden compares got with the file at path (empty lines aside), or rewrites it with
// -update.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run make generate)", err)
	}
	if !bytes.Equal(squeeze(got), squeeze(want)) {
		t.Errorf("%s is stale: the chart renders something else; run make generate and review the diff", path)
	}
}

func TestLintEveryMode(t *testing.T) {
	for _, mode := range modes {
		out, errOut, code := run(t, "lint", chartDir, "--strict", "--kube-version", kubeVersion, "--values", values(mode))
		if code != 0 {
			t.Errorf("helm lint (%s): exit %d\n%s%s", mode, code, out, errOut)
		}
	}
}

// Every mode renders to its golden file: a change of the chart shows as a diff.
func TestTemplateGoldenEveryMode(t *testing.T) {
	for _, mode := range modes {
		golden(t, filepath.Join("testdata", mode+".yaml"), []byte(render(t, "--values", values(mode))))
	}
}

// deploy/ is rendered from the chart, one file per part, so that the chart is the
// one source of the install.
func TestDeployIsRenderedFromTheChart(t *testing.T) {
	deployValues := filepath.Join(chartDir, "ci", "deploy-values.yaml")
	for _, f := range []struct {
		file     string
		template string
		args     []string
	}{
		{"namespace.yaml", "namespace.yaml", []string{"--set", "namespace.create=true"}},
		{"rbac.yaml", "rbac.yaml", nil},
		{"flowschema.yaml", "flowschema.yaml", nil},
		{"controller.yaml", "controller.yaml", nil},
		{"networkpolicy.yaml", "networkpolicy.yaml", nil},
		{"rbac-addons.yaml", "rbac-addons.yaml", []string{"--values", values("addons")}},
		{"rbac-nodegroups.yaml", "rbac-nodegroups.yaml", []string{"--values", values("nodegroups")}},
		{"rbac-access-policies.yaml", "rbac-access-policies.yaml", []string{"--set", "accessPolicies.enabled=true"}},
	} {
		args := append([]string{"--values", deployValues}, f.args...)
		args = append(args, "--show-only", "templates/"+f.template)
		out := render(t, args...)
		header := "# Rendered from charts/nodejoin-controller by `make generate` (values: ci/deploy-values.yaml" +
			map[bool]string{true: ", " + strings.ReplaceAll(strings.Join(f.args, " "), chartDir+"/", ""), false: ""}[len(f.args) > 0] +
			"); do not edit.\n# Prefer `helm install` with values of your own: docs/deploy.md.\n"
		golden(t, filepath.Join("..", "..", "deploy", f.file), []byte(header+out))
	}
}
