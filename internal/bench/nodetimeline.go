package bench

import (
	"bufio"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodejoin/nodejoin/internal/controlplane"
	"github.com/nodejoin/nodejoin/internal/nodeadm/bootstrap"
	"github.com/nodejoin/nodejoin/internal/sandbox/controller"
	"github.com/nodejoin/nodejoin/internal/sandbox/instance"
	"github.com/nodejoin/nodejoin/internal/sandbox/joinstatus"
)

// The steps of a real node's join that ReadNodeJoin times, in the order they happen:
// the launcher's (instance started, images imported), nodeadm's (kubelet started,
// nodeadm done: nodeadm exits once the kubelet has stayed up a moment, so the kubelet
// starts before it is done), then the API side's, named as joinstatus names them.
const (
	StepInstance      = string(joinstatus.StepInstance)
	StepImages        = "images imported"
	StepKubelet       = "kubelet started"
	StepNodeadm       = string(joinstatus.StepNodeadm)
	StepAuthenticated = string(joinstatus.StepAuthenticated)
	StepRegistered    = string(joinstatus.StepRegistered)
	StepServingIssued = string(joinstatus.StepServingIssued)
	StepNetwork       = string(joinstatus.StepNetwork)
	StepReady         = string(joinstatus.StepReady)
)

// NodeSteps lists the steps ReadNodeJoin times, in order, each with the step it
// follows: the kubelet authenticates once started (nodeadm may still be waiting to see
// it stay up), its Node exists once it authenticated, it asks for a serving
// certificate with the addresses of its Node's first status, aws-node runs on it once
// registered, and Ready needs aws-node's CNI configuration.
func NodeSteps() []NodeStep {
	return []NodeStep{{StepInstance, ""}, {StepImages, StepInstance}, {StepKubelet, StepImages}, {StepNodeadm, StepKubelet},
		{StepAuthenticated, StepKubelet}, {StepRegistered, StepAuthenticated}, {StepServingIssued, StepRegistered},
		{StepNetwork, StepRegistered}, {StepReady, StepNetwork}}
}

// ReadNodeJoin reads the join of one real node, instance id, of the running cluster
// whose state directory is dir: when each step happened, each time read from what
// recorded it (the instance's logs and files, the controller's log, the API objects).
// A step with no record yet is missing from its Steps.
func ReadNodeJoin(ctx context.Context, dir, id string) (*NodeJoin, error) {
	recs, err := instance.ReadRecords(filepath.Join(dir, "instances"))
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(recs, func(r *instance.Record) bool { return r.ID == id })
	if i < 0 {
		return nil, fmt.Errorf("no instance %s in %s", id, dir)
	}
	rec := recs[i]
	if rec.Kubelet != instance.KubeletReal {
		return nil, fmt.Errorf("node %s has a simulated kubelet: only a real node's join has these steps", rec.NodeName)
	}
	st, err := controlplane.ReadState(dir)
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", st.Kubeconfig)
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	t := &NodeJoin{Node: rec.NodeName, InstanceID: rec.ID, Launched: rec.Launched}
	add := func(step string, at time.Time, source string) {
		if !at.IsZero() {
			t.Steps = append(t.Steps, StepTime{Step: step, At: at, Source: source})
		}
	}
	year := rec.Launched.Year()
	importLog := filepath.Join(rec.Root, instance.ImportLog)
	add(StepInstance, firstContainerdTime(importLog), "the image import's containerd: first log line")
	add(StepImages, birthTime(filepath.Join(rec.Dir, instance.NodeadmLog)), "nodeadm.log's creation: nodeadm init starts once the images are in")
	add(StepKubelet, modTime(bootstrap.ProcessManager{Root: rec.Root}.PIDFile(bootstrap.Kubelet)), "nodeadm's kubelet pid file: written as it starts the kubelet")
	add(StepNodeadm, nodeadmDone(filepath.Join(rec.Dir, instance.NodeadmLog)), "nodeadm.log: last write, its \"kubelet running\" line")
	bootstrapToken := rec.Identity == instance.IdentityBootstrapToken
	if !bootstrapToken {
		add(StepAuthenticated, tokenAccepted(filepath.Join(dir, controller.LogFile), "system:node:"+rec.NodeName, rec.Launched), "nodejoin-controller log: first \"token accepted\" for the node")
	}
	kubeletLog := filepath.Join(rec.Root, instance.KubeletLog)
	reg := stepFrom{kubeletLogTime(kubeletLog, year, kubeletRegisteredLine), "kubelet log: \"" + kubeletRegisteredLine + "\""}
	ready := stepFrom{kubeletLogTime(kubeletLog, year, kubeletReadyLine), "kubelet log: \"" + kubeletReadyLine + "\""}
	if err := apiTimes(ctx, client, rec, bootstrapToken, add, &reg, &ready); err != nil {
		return nil, err
	}
	add(StepRegistered, reg.at, reg.source)
	add(StepNetwork, modTime(filepath.Join(rec.Root, instance.CNIConfDir, "10-aws.conflist")), "aws-node's CNI configuration: written once its ipamd is ready")
	add(StepReady, ready.at, ready.source)
	// The steps in their order, whatever order the sources were read in.
	order := map[string]int{}
	for i, s := range NodeSteps() {
		order[s.Name] = i
	}
	sortSteps(t.Steps, order)
	return t, nil
}

// stepFrom is a step's time and what recorded it.
type stepFrom struct {
	at     time.Time
	source string
}

// The kubelet's log lines (klog, at its default verbosity) that time its registration
// and its Ready: it logs the second as it sees its node ready, just before it sends the
// status that says so.
const (
	kubeletRegisteredLine = "Successfully registered node"
	kubeletReadyLine      = "Fast updating node status as it just became ready"
)

// apiTimes adds the times the API objects record: the serving certificate's issue (the
// controller's Issued Event on the CSR) and, where the kubelet log has none,
// registration (the Node's creation) and Ready (the Node's condition); in
// bootstrap-token mode, authentication (the client CSR's creation, the first request
// the token made).
func apiTimes(ctx context.Context, client kubernetes.Interface, rec *instance.Record, bootstrapToken bool,
	add func(string, time.Time, string), reg, ready *stepFrom) error {
	snap, err := joinstatus.Take(ctx, client)
	if err != nil {
		return err
	}
	serving, clientCSR := joinCSRs(snap, rec)
	if bootstrapToken && clientCSR != nil {
		add(StepAuthenticated, clientCSR.CreationTimestamp.Time, "the client CSR's creation (whole seconds)")
	}
	if serving != nil && len(serving.Status.Certificate) > 0 {
		at, source := issuedEvent(ctx, client, serving.Name), "nodejoin-controller's Issued Event on the serving CSR"
		if at.IsZero() {
			at, source = approvedAt(serving), "the serving CSR's Approved condition (whole seconds)"
		}
		add(StepServingIssued, at, source)
	}
	node := snap.Nodes[rec.NodeName]
	if node == nil || joinstatus.InstanceID(node.Spec.ProviderID) != rec.ID {
		return nil
	}
	if reg.at.IsZero() {
		*reg = stepFrom{node.CreationTimestamp.Time, "the Node's creation (whole seconds)"}
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && ready.at.IsZero() {
			*ready = stepFrom{c.LastTransitionTime.Time, "the Node's Ready condition (whole seconds)"}
		}
	}
	return nil
}

// joinCSRs are the first serving and client CSRs of rec's node since its launch: its
// join's.
func joinCSRs(snap *joinstatus.Snapshot, rec *instance.Record) (serving, client *certificatesv1.CertificateSigningRequest) {
	user := "system:node:" + rec.NodeName
	for i := range snap.CSRs {
		c := &snap.CSRs[i]
		if c.CreationTimestamp.Time.Before(rec.Launched.Truncate(time.Second)) {
			continue
		}
		switch {
		case c.Spec.SignerName == certificatesv1.KubeletServingSignerName && c.Spec.Username == user && serving == nil:
			serving = c
		case c.Spec.SignerName == certificatesv1.KubeAPIServerClientKubeletSignerName && c.Spec.Username != user && client == nil && nodeOf(c) == user:
			client = c
		}
	}
	return serving, client
}

// nodeOf is the user a client CSR asks to become: its request's subject common name.
func nodeOf(c *certificatesv1.CertificateSigningRequest) string {
	block, _ := pem.Decode(c.Spec.Request)
	if block == nil {
		return ""
	}
	cr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return ""
	}
	return cr.Subject.CommonName
}

// issuedEvent is when the controller recorded issuing the CSR named csr (the Event's
// microsecond EventTime), or zero.
func issuedEvent(ctx context.Context, client kubernetes.Interface, csr string) time.Time {
	evs, err := client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "reason=Issued,involvedObject.name=" + csr})
	if err != nil {
		return time.Time{}
	}
	var at time.Time
	for _, e := range evs.Items {
		t := e.EventTime.Time
		if t.IsZero() {
			t = e.FirstTimestamp.Time
		}
		if at.IsZero() || t.Before(at) {
			at = t
		}
	}
	return at
}

func approvedAt(c *certificatesv1.CertificateSigningRequest) time.Time {
	for _, cond := range c.Status.Conditions {
		if cond.Type == certificatesv1.CertificateApproved {
			return cond.LastUpdateTime.Time
		}
	}
	return time.Time{}
}

func modTime(path string) time.Time {
	st, err := os.Stat(path)
	if err != nil {
		return time.Time{}
	}
	return st.ModTime()
}

// nodeadmDone is when nodeadm init finished: the last write to its log, once the log
// shows the kubelet running.
func nodeadmDone(path string) time.Time {
	data, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(data), "✓ kubelet running") {
		return time.Time{}
	}
	return modTime(path)
}

// containerdTimeRE finds the time of a containerd log line: time="RFC3339".
var containerdTimeRE = regexp.MustCompile(`^time="([^"]+)"`)

// firstContainerdTime is the time of a containerd log's first line, or zero.
func firstContainerdTime(path string) time.Time {
	var at time.Time
	eachLine(path, func(l string) bool {
		if m := containerdTimeRE.FindStringSubmatch(l); m != nil {
			at, _ = time.Parse(time.RFC3339Nano, m[1])
			return false
		}
		return true
	})
	return at
}

// tokenAccepted is the time of the controller log's first "token accepted" line for
// user at or after since, or zero.
func tokenAccepted(path, user string, since time.Time) time.Time {
	var at time.Time
	eachLine(path, func(l string) bool {
		if !strings.Contains(l, `msg="token accepted"`) || !strings.Contains(l, " user="+user+" ") {
			return true
		}
		ts, ok := strings.CutPrefix(l, "time=")
		if !ok {
			return true
		}
		ts, _, _ = strings.Cut(ts, " ")
		t, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil || t.Before(since.Truncate(time.Millisecond)) {
			return true
		}
		at = t
		return false
	})
	return at
}

// klogTimeRE finds the time of a klog line: Lmmdd hh:mm:ss.uuuuuu.
var klogTimeRE = regexp.MustCompile(`^[IWEF](\d{4} \d{2}:\d{2}:\d{2}\.\d{6})`)

// kubeletLogTime is the time of the kubelet log's first line that says text, or zero;
// klog's lines carry no year, so year gives it (in local time, as klog writes).
func kubeletLogTime(path string, year int, text string) time.Time {
	var at time.Time
	eachLine(path, func(l string) bool {
		if !strings.Contains(l, text) {
			return true
		}
		if m := klogTimeRE.FindStringSubmatch(l); m != nil {
			if t, err := time.ParseInLocation("2006 0102 15:04:05.000000", fmt.Sprintf("%d %s", year, m[1]), time.Local); err == nil {
				at = t
				return false
			}
		}
		return true
	})
	return at
}

// birthTime is when the file at path was created, where the file system records it,
// or zero.
func birthTime(path string) time.Time {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, 0, unix.STATX_BTIME, &st); err != nil || st.Mask&unix.STATX_BTIME == 0 {
		return time.Time{}
	}
	return time.Unix(st.Btime.Sec, int64(st.Btime.Nsec))
}

// eachLine calls fn with each line of the file at path until fn returns false.
func eachLine(path string, fn func(string) bool) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		if !fn(sc.Text()) {
			return
		}
	}
}

func sortSteps(steps []StepTime, order map[string]int) {
	slices.SortStableFunc(steps, func(a, b StepTime) int { return order[a.Step] - order[b.Step] })
}
