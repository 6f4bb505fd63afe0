package bench

import (
	"bytes"
	"testing"

	"github.com/nodejoin/nodejoin/internal/printer/printertest"
)

func benchSample(approver string, scale float64) *Report {
	return &Report{
		Nodes: 4, Identity: IdentityBootstrapToken, Approver: approver,
		AllReadySeconds: 1.2 * scale, AllIssuedSeconds: 1.5 * scale, MedianJoinSeconds: 1.1 * scale,
		CSRCreateToApprovedMS: Percentiles{P50: 10, P90: 20, P99: 30, Max: 31, N: 8},
		CSRApprovedToIssuedMS: Percentiles{P50: 5, P90: 6, P99: 7, Max: 8, N: 8},
		CSRCreateToIssuedMS:   Percentiles{P50: 15, P90: 26, P99: 37, Max: 39, N: 8},
		WebhookMS:             Webhook{P50: 2.5, P99: 9.1}, TokenReviews: 12, WebhookCacheHitRate: 0.67,
		APIRequestsPerNode: 25.5, CloudCallsPerNode: 1.25, DescribeInstancesPerNode: 1,
		APIRequestsPerNodeByCall: map[string]float64{
			"POST certificatesigningrequests": 2, "PUT certificatesigningrequests/approval": 2 * scale,
			"GET nodes": 1.5, "PATCH nodes/status": 3 * scale, "WATCH certificatesigningrequests": 2,
		},
		ControllerCPUSeconds: 0.4, ControllerPeakRSSMiB: 50.2, CSRs: 8, Load: "1.00 0.50 0.25",
		SecondsPerNode: 0.375 * scale, KubeletsMiBPerNode: 0.25,
		CPUSeconds:    map[string]float64{"kube-apiserver": 3 * scale, "etcd": 0.5, procController: 0.4, procKubelets: 1.5},
		JoinedSeconds: []float64{0.9, 1.0, 1.2, 1.5},
	}
}

func TestPrintBenchReport(t *testing.T) {
	r := benchSample("nodejoin", 1)
	floor := benchSample(BaselineFloor, 0.8)
	floor.CPUSeconds = map[string]float64{"kube-apiserver": 2, procFloor: 0.1, procKubelets: 1.5}
	r.Baselines = []*Report{benchSample(BaselineKCM, 2), floor}
	r.RatioAllIssuedKCM, r.RatioAllIssuedFloor = 0.5, 1.25
	r.Fault = &FaultReport{Kind: FaultLeaderKill, InjectedAtSeconds: 0.8, ExtraSeconds: 9.25, Run: benchSample("nodejoin", 3)}
	var b bytes.Buffer
	r.WriteText(&b)
	printertest.Golden(t, "bench-join.txt", b.String())

	growth := benchSample("nodejoin", 2)
	growth.Baselines = []*Report{benchSample(BaselineFloor, 1.6)}
	growth.Growth = []GrowthPoint{
		{Nodes: 2, AllIssuedSeconds: 1, MedianJoinSeconds: 0.6, SecondsPerNode: 0.5, APIRequestsPerNode: 20, KubeletsMiBPerNode: 0.125, RatioAllIssued: map[string]float64{BaselineFloor: 1.1}},
		{Nodes: 4, AllIssuedSeconds: 3, MedianJoinSeconds: 2.2, SecondsPerNode: 0.75, APIRequestsPerNode: 25.5, KubeletsMiBPerNode: 0.25, RatioAllIssued: map[string]float64{BaselineFloor: 1.25}},
	}
	b.Reset()
	growth.WriteText(&b)
	printertest.Golden(t, "bench-growth.txt", b.String())

	soak := benchSample("nodejoin", 1)
	soak.Soak = &SoakReport{DurationSeconds: 180.2, CertificateLifetime: "1m0s", NodesJoined: 57, NodesLeft: 27, Rotations: 80,
		RSSFirstMiB: 50, RSSLastMiB: 51.5, RSSGrowthMiB: 1.5, MaxPending: 3,
		Samples: []SoakSample{{Seconds: 10, RSSMiB: 50, Pending: 3, CSRs: 60, Nodes: 30}, {Seconds: 20, RSSMiB: 51.5, Pending: 0, CSRs: 70, Nodes: 30}}}
	b.Reset()
	soak.WriteText(&b)
	printertest.Golden(t, "bench-soak.txt", b.String())
}
