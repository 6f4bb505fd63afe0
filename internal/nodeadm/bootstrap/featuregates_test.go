package bootstrap

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodejoin/nodejoin/internal/userdata"
)

// fakeGateKubelet returns the fake kubelet v1.37.1 of testdata, and the file that counts
// its runs.
func fakeGateKubelet(t *testing.T) (bin, counter string) {
	t.Helper()
	bin, err := filepath.Abs("testdata/fake-kubelet.sh")
	if err != nil {
		t.Fatal(err)
	}
	counter = filepath.Join(t.TempDir(), "runs")
	t.Setenv("FAKE_KUBELET_RUNS", counter)
	return bin, counter
}

func TestKubeletGatesAsksTheKubelet(t *testing.T) {
	bin, _ := fakeGateKubelet(t)
	k := NewKubeletGates(t.Context(), bin, "")
	tests := []struct {
		gate  string
		value bool
		want  GateVerdict
	}{
		// GA gates, which `kubelet --help` does not list, are known.
		{"RotateKubeletServerCertificate", true, GateVerdict{Accepted: true}},
		{"MutableCSINodeAllocatableCount", true, GateVerdict{Accepted: true}},
		{"DRAFractionalCapacityRange", false, GateVerdict{Accepted: true}},
		{"DynamicResourceAllocation", true, GateVerdict{Accepted: true}},
		// A locked gate set against its lock: the kubelet would not start either.
		{"DynamicResourceAllocation", false, GateVerdict{Refusal: "cannot set feature gate DynamicResourceAllocation to false, feature is locked to true"}},
		// Seed 001's gate, removed upstream in v1.33.
		{"DisableKubeletCloudCredentialProviders", true, GateVerdict{Unknown: true, Refusal: "unrecognized feature gate: DisableKubeletCloudCredentialProviders"}},
		{"NoSuchGate", false, GateVerdict{Unknown: true, Refusal: "unrecognized feature gate: NoSuchGate"}},
	}
	for _, tt := range tests {
		got, err := k.CheckGate(tt.gate, tt.value)
		if err != nil || got != tt.want {
			t.Errorf("CheckGate(%s, %t) = %+v, %v; want %+v", tt.gate, tt.value, got, err, tt.want)
		}
	}
}

func TestKubeletGatesCache(t *testing.T) {
	dir := t.TempDir()
	src, counter := fakeGateKubelet(t)
	script, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "kubelet")
	if err := os.WriteFile(bin, script, 0o755); err != nil { //nolint:gosec // G703: a copy of testdata in the test's own directory
		t.Fatal(err)
	}
	cache := filepath.Join(dir, "state", "kubelet-feature-gates.json")
	ask := func(wantRuns int) {
		t.Helper()
		k := NewKubeletGates(t.Context(), bin, cache)
		for _, g := range []string{"RotateKubeletServerCertificate", "DisableKubeletCloudCredentialProviders"} {
			if _, err := k.CheckGate(g, true); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := k.CheckGate("RotateKubeletServerCertificate", true); err != nil || k.CacheErr() != nil {
			t.Fatalf("%v, cache error %v", err, k.CacheErr())
		}
		if got := runs(t, counter); got != wantRuns {
			t.Errorf("%d kubelet run(s), want %d", got, wantRuns)
		}
	}
	ask(2) // first boot: one run per gate
	ask(2) // the same binary: from the cache
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(bin, later, later); err != nil {
		t.Fatal(err)
	}
	ask(4) // a replaced kubelet is asked again
}

func TestKubeletGatesCannotAsk(t *testing.T) {
	dir := t.TempDir()
	starts := filepath.Join(dir, "kubelet-that-starts")
	if err := os.WriteFile(starts, []byte("#!/bin/sh\necho starting\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ bin, want string }{
		{filepath.Join(dir, "no-kubelet"), "finding the kubelet " + filepath.Join(dir, "no-kubelet") + " (give --kubelet-path)"},
		{starts, "it exited without refusing the probe label; its output: starting"},
	}
	for _, tt := range tests {
		_, err := NewKubeletGates(t.Context(), tt.bin, "").CheckGate("RotateKubeletServerCertificate", true)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.bin, err, tt.want)
		}
	}
}

func TestGateDrop(t *testing.T) {
	tests := []struct {
		version, gate string
		value         bool
		v             GateVerdict
		want          string
	}{
		{"v1.37.1", "DisableKubeletCloudCredentialProviders", true, GateVerdict{Unknown: true},
			"kubelet v1.37.1 does not know feature gate DisableKubeletCloudCredentialProviders (removed upstream in v1.33); dropped"},
		{"v1.37.1", "Typo", true, GateVerdict{Unknown: true},
			"kubelet v1.37.1 does not know feature gate Typo (removed upstream, not yet added, or misspelled); dropped"},
		{"", "DynamicResourceAllocation", false, GateVerdict{Refusal: "cannot set feature gate DynamicResourceAllocation to false, feature is locked to true"},
			"the kubelet refuses feature gate DynamicResourceAllocation=false (cannot set feature gate DynamicResourceAllocation to false, feature is locked to true); dropped"},
	}
	for _, tt := range tests {
		if got := GateDrop(tt.version, tt.gate, tt.value, tt.v); got != tt.want {
			t.Errorf("GateDrop(%s) =\n %s\nwant\n %s", tt.gate, got, tt.want)
		}
	}
}

// seed001Kubelet is the kubelet part of seed 001's AL2023 NodeConfig (the MIME user data
// EKS injects into a managed node group).
const seed001Kubelet = `  kubelet:
    config:
      shutdownGracePeriod: 30s
      featureGates:
        DisableKubeletCloudCredentialProviders: true
      maxPods: 17
      clusterDNS:
      - 172.20.0.10
`

func TestRenderDropsGatesTheKubeletRefuses(t *testing.T) {
	bin, _ := fakeGateKubelet(t)
	tests := []struct {
		name, doc    string
		bin          string
		wantWarnings []string
		wantDropIn   []string // substrings of the drop-in; "!x" must be absent
		wantConfig   []string // substrings of config.json
	}{
		{"seed 001: the only user gate is dropped", seed001Kubelet, bin, []string{
			"kubelet v1.37.1 does not know feature gate DisableKubeletCloudCredentialProviders (removed upstream in v1.33); dropped from spec.kubelet.config.featureGates",
		}, []string{"!featureGates", `"shutdownGracePeriod": "30s"`}, []string{`"RotateKubeletServerCertificate": true`, `"DynamicResourceAllocation": true`, `"MutableCSINodeAllocatableCount": true`}},
		{"a known gate stays, a locked one set against its lock goes", `  kubelet:
    config:
      featureGates: {DRAFractionalCapacityRange: true, DynamicResourceAllocation: false, DisableKubeletCloudCredentialProviders: true}
`, bin, []string{
			"kubelet v1.37.1 does not know feature gate DisableKubeletCloudCredentialProviders (removed upstream in v1.33); dropped from spec.kubelet.config.featureGates",
			"kubelet v1.37.1 refuses feature gate DynamicResourceAllocation=false (cannot set feature gate DynamicResourceAllocation to false, feature is locked to true); dropped from spec.kubelet.config.featureGates",
		}, []string{`"featureGates": {
        "DRAFractionalCapacityRange": true
    }`}, nil},
		{"no kubelet to ask: every gate kept, and said", seed001Kubelet, "/nonexistent/kubelet", []string{
			"feature gates not checked against the kubelet, kept as written (nodeadm's defaults: DynamicResourceAllocation, MutableCSINodeAllocatableCount, RotateKubeletServerCertificate): finding the kubelet /nonexistent/kubelet (give --kubelet-path): exec: \"/nonexistent/kubelet\": stat /nonexistent/kubelet: no such file or directory",
			"feature gates not checked against the kubelet, kept as written (spec.kubelet.config.featureGates: DisableKubeletCloudCredentialProviders): finding the kubelet /nonexistent/kubelet (give --kubelet-path): exec: \"/nonexistent/kubelet\": stat /nonexistent/kubelet: no such file or directory",
		}, []string{`"DisableKubeletCloudCredentialProviders": true`}, []string{`"RotateKubeletServerCertificate": true`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := Render(mergedConfig(t, clusterDoc+tt.doc), e2eInstance, Options{
				KubeletVersion: "v1.37.1", CPUMillis: 2000, InstanceTypes: e2eTypes,
				KubeletGates: NewKubeletGates(t.Context(), tt.bin, ""),
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(out.Warnings, "\n"); got != strings.Join(tt.wantWarnings, "\n") {
				t.Errorf("warnings:\n%s\nwant:\n%s", got, strings.Join(tt.wantWarnings, "\n"))
			}
			check := func(path string, wants []string) {
				content := string(file(t, out, path))
				for _, w := range wants {
					if absent, ok := strings.CutPrefix(w, "!"); ok {
						if strings.Contains(content, absent) {
							t.Errorf("%s has %s:\n%s", path, absent, content)
						}
					} else if !strings.Contains(content, w) {
						t.Errorf("%s lacks %s:\n%s", path, w, content)
					}
				}
			}
			check(KubeletDropInPath, tt.wantDropIn)
			check(KubeletConfigPath, tt.wantConfig)
		})
	}
}

func TestRenderChecksNodeadmsOwnGates(t *testing.T) {
	// A kubelet that knows none of the gates nodeadm adds for v1.37.
	dir := t.TempDir()
	bin := filepath.Join(dir, "kubelet")
	script := "#!/bin/sh\nname=${1#--feature-gates=}; name=${name%%=*}\necho \"unrecognized feature gate: $name\" >&2\nexit 1\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := Render(mergedConfig(t, clusterDoc), e2eInstance, Options{
		KubeletVersion: "v1.37.1", CPUMillis: 2000, InstanceTypes: e2eTypes, KubeletGates: NewKubeletGates(t.Context(), bin, ""),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"kubelet v1.37.1 does not know feature gate DynamicResourceAllocation (removed upstream, not yet added, or misspelled); dropped from nodeadm's defaults",
		"kubelet v1.37.1 does not know feature gate MutableCSINodeAllocatableCount (removed upstream, not yet added, or misspelled); dropped from nodeadm's defaults",
		"kubelet v1.37.1 does not know feature gate RotateKubeletServerCertificate (removed upstream, not yet added, or misspelled); dropped from nodeadm's defaults",
	}
	if got := strings.Join(out.Warnings, "\n"); got != strings.Join(want, "\n") {
		t.Errorf("warnings:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	if cfg := string(file(t, out, KubeletConfigPath)); strings.Contains(cfg, "featureGates") {
		t.Errorf("config.json still has feature gates:\n%s", cfg)
	}
}

func TestGateFindings(t *testing.T) {
	bin, _ := fakeGateKubelet(t)
	cfg := mergedConfig(t, clusterDoc+`  kubelet:
    config:
      featureGates: {DisableKubeletCloudCredentialProviders: true, DRAFractionalCapacityRange: true}
`)
	tests := []struct {
		bin  string
		want []userdata.Finding
	}{
		{bin, []userdata.Finding{{Part: "spec.kubelet.config.featureGates", Level: userdata.LevelWarning,
			Msg: "kubelet v1.37.1 does not know feature gate DisableKubeletCloudCredentialProviders (removed upstream in v1.33); nodeadm init drops it"}}},
		{"/nonexistent/kubelet", []userdata.Finding{{Part: "spec.kubelet.config.featureGates", Level: userdata.LevelInfo,
			Msg: "not checked against a kubelet (finding the kubelet /nonexistent/kubelet (give --kubelet-path): exec: \"/nonexistent/kubelet\": stat /nonexistent/kubelet: no such file or directory); nodeadm init checks them against the node's kubelet and drops those it refuses"}}},
	}
	for _, tt := range tests {
		got := GateFindings(t.Context(), cfg, tt.bin)
		if len(got) != len(tt.want) {
			t.Errorf("%s: findings %+v, want %+v", tt.bin, got, tt.want)
			continue
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("%s: finding %d:\n%+v\nwant\n%+v", tt.bin, i, got[i], tt.want[i])
			}
		}
	}
	if got := GateFindings(t.Context(), mergedConfig(t, clusterDoc), bin); got != nil {
		t.Errorf("no feature gates: %+v", got)
	}
}
