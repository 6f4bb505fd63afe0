package nodeconfig

import (
	"math"
	"strings"
	"testing"
)

// Vectors from the upstream unit and e2e tests (reference §5.2–5.6).
func TestClusterDNS(t *testing.T) {
	tests := map[string]string{
		"10.100.0.0/16":  "10.100.0.10",
		"172.20.0.0/16":  "172.20.0.10",
		"192.168.0.0/16": "192.168.0.10",
		"fc00::/7":       "fc00::a",
	}
	for cidr, want := range tests {
		got, err := ClusterDNS(cidr)
		if err != nil || got != want {
			t.Errorf("ClusterDNS(%s) = %q, %v; want %q", cidr, got, err, want)
		}
	}
	if _, err := ClusterDNS("fe80::1"); err == nil {
		t.Error("ClusterDNS accepted an address without a prefix length")
	}
}

func TestMaxPodsExpression(t *testing.T) {
	tests := []struct {
		expr      string
		info      ENIInfo
		want      int
		wantError string
	}{
		{"", ENIInfo{3, 6}, 17, ""},
		{"", ENIInfo{6, 12}, 68, ""},
		{"(default_enis * (ips_per_eni - 1)) + 2", ENIInfo{3, 6}, 17, ""},
		{"(default_enis * (ips_per_eni - 1)) + 3", ENIInfo{3, 6}, 18, ""},
		{"417", ENIInfo{3, 6}, 417, ""},
		{"(default_enis * ((ips_per_eni - 1) * 16)) + 2", ENIInfo{3, 6}, 242, ""},
		{"((default_enis * ((ips_per_eni * 16) - 1)) + 2) < 30 ? ((default_enis * ((ips_per_eni * 16) - 1)) + 2) : 30", ENIInfo{3, 6}, 30, ""},
		{"((default_enis - 1) * (ips_per_eni - 1)) + 2", ENIInfo{3, 6}, 12, ""},
		{"((default_enis -1) * (ips_per_eni - 1)) + 2", ENIInfo{4, 15}, 44, ""},
		{"max_pods < 30 ? max_pods : 30", ENIInfo{3, 12}, 30, ""},
		{"max_pods + 2", ENIInfo{4, 15}, 60, ""},
		{"99 - fake_variable", ENIInfo{3, 6}, 17, "does not compile"},
		{"max_pods - 2", ENIInfo{1, 0}, 1, "max pods value -1 is invalid"},
		{"max_pods - ((default_enis*(ips_per_eni-1))+2)", ENIInfo{3, 6}, 17, "max pods value 0 is invalid"},
		{"default_enis * 2", ENIInfo{math.MaxInt32, 2}, math.MaxInt32*(1) + 2, "max pods value"},
		{"default_enis * default_enis * default_enis", ENIInfo{math.MaxInt32, 2}, 0, "evaluation failed"},
		{"true", ENIInfo{3, 6}, 17, "result true is a bool, not an int"},
	}
	for _, tt := range tests {
		got, err := MaxPods(tt.info, tt.expr)
		if tt.wantError != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantError) {
				t.Errorf("MaxPods(%q) error = %v, want %q", tt.expr, err, tt.wantError)
			}
			if got != tt.info.StandardMaxPods() {
				t.Errorf("MaxPods(%q) fell back to %d, want the standard %d", tt.expr, got, tt.info.StandardMaxPods())
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("MaxPods(%q, %+v) = %d, %v; want %d", tt.expr, tt.info, got, err, tt.want)
		}
	}
}

func TestKubeReserved(t *testing.T) {
	mem := map[int]int{4: 299, 8: 343, 11: 376, 17: 442, 29: 574, 44: 739, 58: 893, 60: 915, 110: 1465, 234: 2829, 250: 3005, 737: 8362}
	for pods, want := range mem {
		if got := KubeReservedMemoryMi(pods); got != want {
			t.Errorf("KubeReservedMemoryMi(%d) = %d, want %d", pods, got, want)
		}
	}
	cpu := map[int]int{1: 60, 2: 70, 4: 80, 8: 90, 16: 110, 32: 150, 36: 160, 48: 190, 64: 230, 72: 250, 96: 310, 128: 390, 192: 550, 448: 1190}
	for cores, want := range cpu {
		if got := KubeReservedCPUMillis(cores * 1000); got != want {
			t.Errorf("KubeReservedCPUMillis(%d cores) = %d, want %d", cores, got, want)
		}
	}
}

func TestEvalConstantMaxPods(t *testing.T) {
	if n, err := EvalConstantMaxPods("20"); err != nil || n != 20 {
		t.Errorf("EvalConstantMaxPods(20) = %d, %v", n, err)
	}
	for _, expr := range []string{"max_pods - 2", "default_enis * 2", "0"} {
		if n, err := EvalConstantMaxPods(expr); err == nil {
			t.Errorf("EvalConstantMaxPods(%q) = %d, want an error", expr, n)
		}
	}
}
