package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeLog(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTimelineLogTimes(t *testing.T) {
	launched := time.Date(2026, 11, 28, 1, 16, 36, 225538216, time.UTC)
	controllerLog := writeLog(t, `time=2026-11-28T01:16:30.100Z level=INFO msg="token accepted" user=system:node:ip-198-18-0-11.local.internal arn=[x] latency=1ms
time=2026-11-28T01:16:42.500Z level=INFO msg="token accepted" user=system:node:ip-198-18-0-110.local.internal arn=[x] latency=1ms
time=2026-11-28T01:16:42.894Z level=INFO msg="token accepted" user=system:node:ip-198-18-0-11.local.internal arn=[x] latency=13ms
time=2026-11-28T01:16:50.000Z level=INFO msg="token accepted" user=system:node:ip-198-18-0-11.local.internal arn=[x] latency=1ms
`)
	// The first line is an earlier instance's of the same name; the second another node's.
	if got, want := tokenAccepted(controllerLog, "system:node:ip-198-18-0-11.local.internal", launched), time.Date(2026, 11, 28, 1, 16, 42, 894000000, time.UTC); !got.Equal(want) {
		t.Errorf("token accepted at %v, want %v", got, want)
	}
	if got := tokenAccepted(controllerLog, "system:node:other", launched); !got.IsZero() {
		t.Errorf("a node with no token accepted: %v", got)
	}

	kubeletLog := writeLog(t, `I1128 01:16:41.000001    4242 server.go:1] "Starting kubelet"
I1128 01:16:42.950123    4242 kubelet_node_status.go:78] "Successfully registered node" node="ip-198-18-0-11.local.internal"
I1128 01:16:46.000200    4242 kubelet_node_status.go:720] "Fast updating node status as it just became ready"
`)
	if got, want := kubeletLogTime(kubeletLog, 2026, kubeletReadyLine), time.Date(2026, 11, 28, 1, 16, 46, 200000, time.Local); !got.Equal(want) {
		t.Errorf("Ready at %v, want %v", got, want)
	}
	if got, want := kubeletLogTime(kubeletLog, 2026, kubeletRegisteredLine), time.Date(2026, 11, 28, 1, 16, 42, 950123000, time.Local); !got.Equal(want) {
		t.Errorf("registered at %v, want %v", got, want)
	}

	importLog := writeLog(t, `time="2026-11-28T01:16:36.331201000Z" level=info msg="starting containerd" revision=x
time="2026-11-28T01:16:42.000000000Z" level=info msg="Stop CRI service"
`)
	if got, want := firstContainerdTime(importLog), time.Date(2026, 11, 28, 1, 16, 36, 331201000, time.UTC); !got.Equal(want) {
		t.Errorf("import started at %v, want %v", got, want)
	}

	// A file just written was born just now, where the file system records it.
	if at := birthTime(importLog); !at.IsZero() && (time.Since(at) > time.Minute || time.Until(at) > time.Minute) {
		t.Errorf("a file just written was created at %v", at)
	}
	if got := nodeadmDone(writeLog(t, "✓ containerd running (106ms)\nerror: kubelet exited\n")); !got.IsZero() {
		t.Errorf("a nodeadm that did not start the kubelet is done at %v", got)
	}
	if got := nodeadmDone(writeLog(t, "✓ kubelet running (1.009s)\n")); got.IsZero() {
		t.Error("a nodeadm that started the kubelet is not done")
	}
	for _, missing := range []time.Time{firstContainerdTime("/nonexistent"), kubeletLogTime("/nonexistent", 2026, kubeletReadyLine), birthTime("/nonexistent"), modTime("/nonexistent")} {
		if !missing.IsZero() {
			t.Errorf("a missing file gives %v", missing)
		}
	}
}

func TestNodeStepsFollowEarlierSteps(t *testing.T) {
	seen := map[string]bool{}
	for i, s := range NodeSteps() {
		if (i == 0) != (s.After == "") || s.After != "" && !seen[s.After] {
			t.Errorf("step %s follows %q, not an earlier step", s.Name, s.After)
		}
		seen[s.Name] = true
	}
}

// The logs are written inside the instance (the kubelet's) or hold what nodes sent
// (the controller's): whatever a line says, the readers return a time from a line that
// names the user, or none.
func FuzzTimelineLogTimes(f *testing.F) {
	f.Add(`time=2026-11-28T01:16:42.894Z level=INFO msg="token accepted" user=system:node:n arn=[x]`, `I1128 01:16:42.950123 1 x.go:1] "Successfully registered node"`)
	f.Add(`time= msg="token accepted" user=system:node:n `, `I9999 99:99:99.999999 "Successfully registered node"`)
	f.Fuzz(func(t *testing.T, controllerLine, kubeletLine string) {
		since := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		at := tokenAccepted(writeLog(t, controllerLine+"\n"), "system:node:n", since)
		if !at.IsZero() && (at.Before(since) || !strings.Contains(controllerLine, " user=system:node:n ")) {
			t.Errorf("token accepted at %v from %q", at, controllerLine)
		}
		reg := kubeletLogTime(writeLog(t, kubeletLine+"\n"), 2026, kubeletRegisteredLine)
		if !reg.IsZero() && (reg.Year() != 2026 || !strings.Contains(kubeletLine, "Successfully registered node")) {
			t.Errorf("registered at %v from %q", reg, kubeletLine)
		}
	})
}
