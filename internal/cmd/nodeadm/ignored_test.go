package nodeadm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodejoin/nodejoin/internal/nodeadm/bootstrap"
)

const localStorageWarning = "spec.instance.localStorage: local storage setup (bootstrap.sh --local-disks) is not implemented yet"

// Local storage validates, but init does not set it up yet: init logs a warning and
// config check prints one, instead of dropping the setting silently.
func TestLocalStorageIsReportedAsIgnored(t *testing.T) {
	dir := t.TempDir()
	// A valid seed, with the local storage part of each case merged over it.
	valid := "file://" + seeds + "004_seed001_al2023-nodeconfig-required-fields.yaml"
	nodeConfig := func(extra string) string {
		p := filepath.Join(dir, "localstorage.yaml")
		doc := "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n" + extra
		if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return "file://" + p
	}
	tests := []struct {
		name string
		doc  string
		want bool
	}{
		{"raid0", "  instance: {localStorage: {strategy: RAID0}}\n", true},
		{"mount path only", "  instance: {localStorage: {mountPath: /mnt/k8s-disks}}\n", true},
		{"none", "  kubelet: {flags: [--v=2]}\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := run(t, "config", "check", "-c", valid, "-c", nodeConfig(tt.doc))
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if got := strings.Contains(out, "warning: "+localStorageWarning); got != tt.want {
				t.Errorf("warning printed %v, want %v:\n%s", got, tt.want, out)
			}
		})
	}

	t.Run("bootstrap.sh --local-disks raid0 through init", func(t *testing.T) {
		cloudFor(t, []byte("#!/bin/bash\n/etc/eks/bootstrap.sh bys-dev-eks-main --local-disks raid0\n"))
		out, err := run(t, "init", "--root", t.TempDir(), "--skip", "run", "--kubelet-version", "v1.37.1", "--log-format", "json")
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if !strings.Contains(out, `"level":"WARN","msg":"setting ignored","field":"spec.instance.localStorage"`) {
			t.Errorf("no warning logged:\n%s", out)
		}
	})
}

// `kubelet --version` is asked once per kubelet binary; later boots read the answer
// from the node's state directory.
func TestInitCachesTheKubeletVersion(t *testing.T) {
	cloudFor(t, seed(t, "006_"))
	root, bin := t.TempDir(), t.TempDir()
	kubelet, counter := filepath.Join(bin, "kubelet"), filepath.Join(bin, "runs")
	writeKubelet := func(version string) {
		// Only --version runs are counted; nodeadm's feature-gate probe is answered
		// as a kubelet does (accepting every gate), and cached separately.
		script := "#!/bin/sh\ncase \"$1\" in --feature-gates=*) echo 'refused: [kubernetes.io/nodeadm-gate-probe]' >&2; exit 1;; esac\n" +
			"echo run >> " + counter + "\necho 'Kubernetes " + version + "'\n"
		if err := os.WriteFile(kubelet, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	runs := func() int {
		data, _ := os.ReadFile(counter)
		return strings.Count(string(data), "run")
	}
	initOnce := func() string {
		t.Helper()
		out, err := run(t, "init", "--root", root, "--skip", "run", "--kubelet-path", kubelet, "-v", "4")
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return out
	}
	writeKubelet("v1.33.4")
	initOnce()
	initOnce()
	out := initOnce()
	if runs() != 1 || !strings.Contains(out, "cached=true") {
		t.Errorf("kubelet asked %d times over three boots, want 1:\n%s", runs(), out)
	}
	if _, err := os.Stat(filepath.Join(root, bootstrap.KubeletVersionCachePath)); err != nil {
		t.Errorf("cache file: %v", err)
	}

	// An upgraded kubelet is asked again, and its version is the one rendered.
	writeKubelet("v1.35.2")
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(kubelet, later, later); err != nil {
		t.Fatal(err)
	}
	initOnce()
	initOnce()
	if runs() != 2 {
		t.Errorf("kubelet asked %d times, want 2 after the upgrade", runs())
	}
	cfg, err := os.ReadFile(filepath.Join(root, bootstrap.KubeletConfigPath))
	if err != nil {
		t.Fatal(err)
	}
	// 1.34 and later get the shutdown grace period.
	if !strings.Contains(string(cfg), `"shutdownGracePeriod": "2m30s"`) {
		t.Errorf("config.json does not follow the upgraded kubelet:\n%s", cfg)
	}
}
