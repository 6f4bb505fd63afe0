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
		JoinedSeconds: []float64{0.9, 1.0, 1.2, 1.5},
	}
}

func TestPrintBenchReport(t *testing.T) {
	r := benchSample("nodejoin", 1)
	r.Baseline = benchSample("kcm", 2)
	r.RatioAllIssued = 0.5
	r.Fault = &FaultReport{Kind: FaultLeaderKill, InjectedAtSeconds: 0.8, ExtraSeconds: 9.25, Run: benchSample("nodejoin", 3)}
	var b bytes.Buffer
	r.WriteText(&b)
	printertest.Golden(t, "bench-join.txt", b.String())

	soak := benchSample("nodejoin", 1)
	soak.Soak = &SoakReport{DurationSeconds: 180.2, CertificateLifetime: "1m0s", NodesJoined: 57, NodesLeft: 27, Rotations: 80,
		RSSFirstMiB: 50, RSSLastMiB: 51.5, RSSGrowthMiB: 1.5, MaxPending: 3,
		Samples: []SoakSample{{Seconds: 10, RSSMiB: 50, Pending: 3, CSRs: 60, Nodes: 30}, {Seconds: 20, RSSMiB: 51.5, Pending: 0, CSRs: 70, Nodes: 30}}}
	b.Reset()
	soak.WriteText(&b)
	printertest.Golden(t, "bench-soak.txt", b.String())
}
