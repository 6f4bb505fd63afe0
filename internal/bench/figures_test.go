package bench

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodejoin/nodejoin/internal/printer/printertest"
)

var update = printertest.Update

func TestPercentiles(t *testing.T) {
	msList := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // 100..1, unsorted
	}
	for _, tc := range []struct {
		name string
		in   []time.Duration
		want Percentiles
	}{
		{"empty", nil, Percentiles{}},
		{"one", msList(7), Percentiles{P50: 7, P90: 7, P99: 7, Max: 7, N: 1}},
		{"two", msList(20, 10), Percentiles{P50: 10, P90: 20, P99: 20, Max: 20, N: 2}},
		{"hundred", msList(hundred...), Percentiles{P50: 50, P90: 90, P99: 99, Max: 100, N: 100}},
		{"sub-millisecond", []time.Duration{1500 * time.Microsecond, 250 * time.Microsecond}, Percentiles{P50: 0.3, P90: 1.5, P99: 1.5, Max: 1.5, N: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.in)
			if got := percentiles(tc.in); got != tc.want {
				t.Errorf("percentiles = %+v, want %+v", got, tc.want)
			}
			if !slices.Equal(in, tc.in) {
				t.Error("percentiles changed its input")
			}
		})
	}
}

func TestPerNodeAndRatio(t *testing.T) {
	for _, tc := range []struct {
		got, want float64
	}{
		{perNode(2570, 100), 25.7},
		{perNode(1, 3), 0.33},
		{perNode(5, 0), 0},
		{ratio(21.3, 30), 0.71},
		{ratio(1, 0), 0},
	} {
		if tc.got != tc.want {
			t.Errorf("got %v, want %v", tc.got, tc.want)
		}
	}
}

const metricsText = `# HELP apiserver_request_total Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",resource="nodes",verb="GET"} 120
apiserver_request_total{code="201",component="apiserver",resource="certificatesigningrequests",verb="POST"} 30
apiserver_request_total{code="409",component="apiserver",resource="configmaps",verb="PUT",message="a \"quoted\", value"} 2
apiserver_request_duration_seconds_count{verb="GET"} 999
nodejoin_token_review_seconds_bucket{outcome="authenticated",le="0.001"} 0
nodejoin_token_review_seconds_bucket{outcome="authenticated",le="0.005"} 40
nodejoin_token_review_seconds_bucket{outcome="authenticated",le="0.01"} 90
nodejoin_token_review_seconds_bucket{outcome="authenticated",le="+Inf"} 100
nodejoin_token_review_seconds_bucket{outcome="denied",le="0.001"} 0
nodejoin_token_review_seconds_bucket{outcome="denied",le="0.005"} 0
nodejoin_token_review_seconds_bucket{outcome="denied",le="0.01"} 0
nodejoin_token_review_seconds_bucket{outcome="denied",le="+Inf"} 0
nodejoin_token_cache_hits_total 75
`

// Requests are split by verb and resource, with the subresource; a burst's share
// per node is what was added between the two readings.
func TestCallsPerNode(t *testing.T) {
	before := byCall([]sample{
		{name: "apiserver_request_total", labels: map[string]string{"verb": "PUT", "resource": "certificatesigningrequests", "subresource": "approval", "code": "200"}, value: 4},
		{name: "apiserver_request_total", labels: map[string]string{"verb": "GET", "resource": "nodes", "code": "200"}, value: 10},
	})
	after := byCall([]sample{
		{name: "apiserver_request_total", labels: map[string]string{"verb": "PUT", "resource": "certificatesigningrequests", "subresource": "approval", "code": "200"}, value: 20},
		{name: "apiserver_request_total", labels: map[string]string{"verb": "PUT", "resource": "certificatesigningrequests", "subresource": "approval", "code": "409"}, value: 4},
		{name: "apiserver_request_total", labels: map[string]string{"verb": "GET", "resource": "nodes", "code": "200"}, value: 10},
		{name: "apiserver_request_total", labels: map[string]string{"verb": "POST", "resource": "certificatesigningrequests", "code": "201"}, value: 8},
		{name: "apiserver_request_duration_seconds_count", labels: map[string]string{"verb": "GET", "resource": "nodes"}, value: 99},
	})
	got := callsPerNode(before, after, 4)
	want := map[string]float64{"PUT certificatesigningrequests/approval": 5, "POST certificatesigningrequests": 2}
	if !maps.Equal(got, want) {
		t.Errorf("calls per node %v, want %v", got, want)
	}
	if total(after) != 42 {
		t.Errorf("total %v, want 42", total(after))
	}
}

func TestParseMetrics(t *testing.T) {
	s, err := parseMetrics(strings.NewReader(metricsText), "apiserver_request_total", "nodejoin_token_cache_hits_total")
	if err != nil {
		t.Fatal(err)
	}
	if got := sum(s, "apiserver_request_total"); got != 152 {
		t.Errorf("apiserver_request_total = %v, want 152", got)
	}
	if got := sum(s, "nodejoin_token_cache_hits_total"); got != 75 {
		t.Errorf("cache hits = %v, want 75", got)
	}
	if got := sum(s, "apiserver_request_duration_seconds_count"); got != 0 {
		t.Errorf("a sample not asked for was kept: %v", got)
	}
	for _, x := range s {
		if x.labels["message"] != "" && x.labels["message"] != `a "quoted", value` {
			t.Errorf("escaped label value read as %q", x.labels["message"])
		}
	}
}

func TestHistogramQuantile(t *testing.T) {
	s, err := parseMetrics(strings.NewReader(metricsText))
	if err != nil {
		t.Fatal(err)
	}
	const name = "nodejoin_token_review_seconds_bucket"
	for _, tc := range []struct {
		q, want float64
	}{
		{0.5, 0.006}, // 50th of 100: 10 into the 50 of (0.005, 0.01], a fifth of the way
		{0.2, 0.003}, // 20th: halfway through the 40 of (0.001, 0.005]
		{0.99, 0.01}, // above the highest finite bound: that bound
	} {
		if got := round(histogramQuantile(s, name, tc.q), 6); got != tc.want {
			t.Errorf("q%v = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := histogramQuantile(nil, name, 0.5); got != 0 {
		t.Errorf("empty histogram: %v, want 0", got)
	}
	delta := histogramDelta(s, s, name)
	if got := histogramQuantile(delta, name, 0.5); got != 0 {
		t.Errorf("a histogram less itself: %v, want 0", got)
	}
}

func TestCounterAcrossRestart(t *testing.T) {
	var c counter
	for _, v := range []float64{100, 150, 400, 20, 70} { // the process restarted after 400
		c.observe(v)
	}
	if c.total != 370 {
		t.Errorf("total = %v, want 370 (300 before the restart, 70 after)", c.total)
	}
}

func TestReadProc(t *testing.T) {
	st, err := readProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.peakMiB <= 0 || st.rssMiB <= 0 || st.peakMiB < st.rssMiB || st.cpuSeconds < 0 {
		t.Errorf("implausible figures of this process: %+v", st)
	}
}

// sampleReport is a report with every field set, for the golden files.
func sampleReport() *Report {
	one := func(scale float64) *Report {
		return &Report{
			Nodes: 4, Identity: IdentityBootstrapToken, Approver: "nodejoin",
			AllReadySeconds: 1.2 * scale, AllIssuedSeconds: 1.5 * scale, MedianJoinSeconds: 1.1 * scale,
			CSRCreateToApprovedMS: Percentiles{P50: 10, P90: 20, P99: 30, Max: 31, N: 8},
			CSRApprovedToIssuedMS: Percentiles{P50: 5, P90: 6, P99: 7, Max: 8, N: 8},
			CSRCreateToIssuedMS:   Percentiles{P50: 15, P90: 26, P99: 37, Max: 39, N: 8},
			WebhookMS:             Webhook{P50: 2.5, P99: 9.1}, TokenReviews: 12, WebhookCacheHitRate: 0.67,
			APIRequestsPerNode: 25.5, CloudCallsPerNode: 1.25, CloudCalls: CloudCalls{STS: 0, EC2: 4, IAM: 1},
			DescribeInstancesPerNode: 1, ControllerCPUSeconds: 0.4, ControllerPeakRSSMiB: 50.2,
			CSRs: 8, Load: "1.00 0.50 0.25", JoinedSeconds: []float64{0.9 * scale, 1.0 * scale, 1.2 * scale, 1.5 * scale},
			SecondsPerNode: 0.375 * scale, KubeletsMiBPerNode: 0.25,
			APIRequestsPerNodeByCall: map[string]float64{"POST certificatesigningrequests": 2, "PUT certificatesigningrequests/approval": 2},
			CPUSeconds:               map[string]float64{"kube-apiserver": 3 * scale, "etcd": 0.5, procController: 0.4, "kube-controller-manager": 0.1, procKubelets: 1.5},
		}
	}
	r := one(1)
	kcm := one(2)
	kcm.Approver = BaselineKCM
	floor := one(0.8)
	floor.Approver = BaselineFloor
	floor.CPUSeconds = map[string]float64{"kube-apiserver": 2.4, "etcd": 0.5, procFloor: 0.1, "kube-controller-manager": 0.1, procKubelets: 1.5}
	r.Baselines = []*Report{kcm, floor}
	r.RatioAllIssuedKCM, r.RatioAllIssuedFloor = 0.5, 1.25
	f := one(1.5)
	r.Fault = &FaultReport{Kind: FaultAPIServerRestart, InjectedAtSeconds: 0.8, ExtraSeconds: 0.75, Run: f}
	return r
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file; run with -update if the change is meant\ngot:\n%s", name, got)
	}
}

func TestReportJSON(t *testing.T) {
	data, err := json.MarshalIndent(sampleReport(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "report.json", append(data, '\n'))
	// The fields the issue asks for, whatever else the report holds.
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"nodes", "all_ready_seconds", "all_issued_seconds", "csr_create_to_issued_ms", "webhook_ms",
		"api_requests_per_node", "cloud_calls_per_node", "controller_cpu_seconds", "controller_peak_rss_mib", "left_pending",
		"baselines", "ratio_all_issued_kcm", "ratio_all_issued_floor", "median_join_seconds", "api_requests_per_node_by_call",
		"cpu_seconds", "seconds_per_node", "kubelets_mib_per_node"} {
		if _, ok := m[k]; !ok {
			t.Errorf("no %q in the JSON report", k)
		}
	}
	for _, k := range []string{"p50", "p90", "p99", "max"} {
		if _, ok := m["csr_create_to_issued_ms"].(map[string]any)[k]; !ok {
			t.Errorf("no csr_create_to_issued_ms.%s", k)
		}
	}
	for _, k := range []string{"p50", "p99"} {
		if _, ok := m["webhook_ms"].(map[string]any)[k]; !ok {
			t.Errorf("no webhook_ms.%s", k)
		}
	}
	for _, b := range m["baselines"].([]any) {
		for _, k := range []string{"approver", "all_issued_seconds", "median_join_seconds", "csr_create_to_issued_ms", "api_requests_per_node_by_call", "cpu_seconds"} {
			if _, ok := b.(map[string]any)[k]; !ok {
				t.Errorf("baseline %v lacks %s", b.(map[string]any)["approver"], k)
			}
		}
	}
	for _, p := range []string{"kube-apiserver", "etcd", procController, procKubelets} {
		if _, ok := m["cpu_seconds"].(map[string]any)[p]; !ok {
			t.Errorf("no cpu_seconds.%s", p)
		}
	}
}

func TestPlotSVG(t *testing.T) {
	r := sampleReport()
	var b bytes.Buffer
	if err := PlotSVG(&b, PlotNodes(r), PlotSeries(r)); err != nil {
		t.Fatal(err)
	}
	golden(t, "plot.svg", b.Bytes())
	if n := strings.Count(b.String(), "<polyline"); n != 4 {
		t.Errorf("%d lines drawn, want 4 (ours, the fault run, the two baselines)", n)
	}
	// A growth run draws one line per size, as high as the largest.
	r.Growth = []GrowthPoint{{Nodes: 2, JoinedSeconds: []float64{0.5, 0.7}}, {Nodes: 4, JoinedSeconds: r.JoinedSeconds}, {Nodes: 8, JoinedSeconds: []float64{1, 1, 1, 2, 2, 2, 3, 3}}}
	b.Reset()
	if err := PlotSVG(&b, PlotNodes(r), PlotSeries(r)); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(b.String(), "<polyline"); n != 3 || !strings.Contains(b.String(), "nodejoin-controller, 8 nodes") || !strings.Contains(b.String(), "8 nodes started") {
		t.Errorf("growth plot: %d lines, want one per size, 8 nodes high:\n%s", n, b.String())
	}
}

func TestNiceCeil(t *testing.T) {
	for _, tc := range []struct{ in, want float64 }{{0, 1}, {0.7, 1}, {1.5, 2}, {4.95, 5}, {21.3, 50}, {101, 200}} {
		if got := niceCeil(tc.in); got != tc.want {
			t.Errorf("niceCeil(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
