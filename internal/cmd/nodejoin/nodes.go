package nodejoin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/atomicfile"
	"github.com/nodejoin/nodejoin/internal/bootstraptoken"
	"github.com/nodejoin/nodejoin/internal/sandbox/controlplane"
	"github.com/nodejoin/nodejoin/internal/sandbox/instance"
	"github.com/nodejoin/nodejoin/internal/sandbox/joinstatus"
	"github.com/nodejoin/nodejoin/internal/toolbin"
)

// nodeOptions are up's flags about worker nodes.
type nodeOptions struct {
	Count        int           `json:"count"`
	InstanceType string        `json:"instanceType"`
	AMIFamily    string        `json:"amiFamily"`
	Identity     string        `json:"identity"`
	Kubelet      string        `json:"kubelet"`
	Timeout      time.Duration `json:"timeout"`
	// For `nodejoin node add`: flags for the kubelets, another node whose credentials
	// the new instances present, and an address they claim.
	KubeletFlags  []string `json:"kubeletFlags,omitempty"`
	CredentialsOf string   `json:"credentialsOf,omitempty"`
	ClaimAddress  string   `json:"claimAddress,omitempty"`
}

// nodesFile records, in the state directory, the nodes `up` launched and how long each
// took to become Ready, for the summary that `up --detach` prints.
const nodesFile = "nodes.json"

// nodeSummary is one row of the summary.
type nodeSummary struct {
	Node       string        `json:"node"`
	Instance   string        `json:"instance"`
	IP         string        `json:"ip"`
	Kubelet    string        `json:"kubelet"`
	ReadyAfter time.Duration `json:"readyAfter"`
}

// nodeRole is the instance role of a cluster's local instances.
func nodeRole(cluster string) string { return "nodejoin-" + cluster + "-node" }

// workers are a cluster's local instances, run by the process that runs the cluster.
type workers struct {
	prov      *instance.Provider
	kubelet   instance.KubeletKind
	identity  instance.Identity
	token     string // bootstrap-token mode; a secret
	simLogDir string
}

// resolveKubelet picks the kubelet kind: real when this process can run real kubelets,
// otherwise sim, with the reason.
func resolveKubelet(asked string, network controlplane.Network) (instance.KubeletKind, string, error) {
	switch asked {
	case "sim":
		return instance.KubeletSim, "", nil
	case "real", "":
	default:
		return "", "", fmt.Errorf("--kubelet %q: want real or sim", asked)
	}
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	if network == controlplane.NetworkLoopback {
		missing = append(missing, "the cluster's network namespace (--network namespace)")
	}
	for _, bin := range []string{"containerd", "runc", "nsenter", "ip"} {
		if _, err := exec.LookPath(bin); err != nil {
			missing = append(missing, bin)
		}
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		missing = append(missing, "the CNI plugins in /usr/lib/cni")
	}
	if len(missing) == 0 {
		return instance.KubeletReal, "", nil
	}
	if asked == "real" {
		return "", "", fmt.Errorf("--kubelet real needs %s; run `make deps` as root, or use --kubelet sim", strings.Join(missing, ", "))
	}
	return instance.KubeletSim, "real kubelets need " + strings.Join(missing, ", ") + " (install with `make deps` as root): using simulated kubelets", nil
}

// nodeadmPath finds nodeadm beside this executable, else among the tools.
func nodeadmPath() (string, error) {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), toolbin.Nodeadm)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := toolbin.Find(toolbin.Dir(), toolbin.Nodeadm)
	if err != nil {
		return "", fmt.Errorf("%w (build it with `make build`)", err)
	}
	return p, nil
}

// startWorkers prepares the control plane for nodes (their access entry or bootstrap
// token) and the provider that launches them.
func startWorkers(ctx context.Context, c *controlplane.Cluster, cp *controlPlane, o nodeOptions, binDir string, progress io.Writer, log *slog.Logger) (*workers, error) {
	kind, why, err := resolveKubelet(o.Kubelet, c.Options().Network)
	if err != nil {
		return nil, err
	}
	if why != "" {
		fmt.Fprintf(progress, " • %s\n", why)
	}
	identity := instance.Identity(o.Identity)
	if identity != instance.IdentityAWSIAM && identity != instance.IdentityBootstrapToken {
		return nil, fmt.Errorf("--identity %q: want aws-iam or bootstrap-token", o.Identity)
	}
	nodeadm, err := nodeadmPath()
	if err != nil {
		return nil, err
	}
	if binDir == "" {
		binDir = toolbin.Dir()
	}
	kubeletPath, containerdPath := "", ""
	if kind == instance.KubeletReal {
		if kubeletPath, err = toolbin.Find(binDir, toolbin.Kubelet); err != nil {
			return nil, err
		}
		if containerdPath, err = exec.LookPath("containerd"); err != nil {
			return nil, err
		}
	}
	caPEM, err := os.ReadFile(c.CAFile())
	if err != nil {
		return nil, err
	}
	opts := c.Options()
	prov, err := instance.New(instance.Config{
		Cluster: instance.ClusterInfo{Name: c.Name(), Endpoint: c.InternalEndpoint(), CAPEM: caPEM, ServiceCIDR: opts.ServiceCIDR},
		// Simulated kubelets run in this process, on the host side of the forwarded port.
		HostEndpoint: c.Endpoint(),
		Dir:          filepath.Join(c.StateDir(), "instances"),
		ClusterNS:    c.Namespace(),
		Bridge:       controlplane.BridgeName,
		NodeCIDR:     opts.NodeCIDR,
		Gateway:      opts.BridgeAddr(),
		Cloud:        cp.Cloud,
		Zone:         localRegion + "a",
		NodeadmPath:  nodeadm, KubeletPath: kubeletPath, ContainerdPath: containerdPath,
		Log: log,
	})
	if err != nil {
		return nil, err
	}
	w := &workers{prov: prov, kubelet: kind, identity: identity, simLogDir: filepath.Join(c.StateDir(), "logs", "kubeletsim")}
	client, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		return nil, err
	}
	switch identity {
	case instance.IdentityAWSIAM:
		dyn, err := dynamic.NewForConfig(c.RESTConfig())
		if err != nil {
			return nil, err
		}
		if err := ensureAccessEntry(ctx, dyn, c.Name(), prov.RoleARN(nodeRole(c.Name()))); err != nil {
			return nil, err
		}
	case instance.IdentityBootstrapToken:
		if w.token, err = bootstraptoken.Mint(ctx, client, "local", 24*time.Hour, time.Now()); err != nil {
			return nil, fmt.Errorf("minting a bootstrap token: %w", err)
		}
	}
	return w, nil
}

// ensureAccessEntry maps the nodes' instance role to the node identity, as an EKS
// access entry of type EC2_LINUX does.
func ensureAccessEntry(ctx context.Context, dyn dynamic.Interface, cluster, roleARN string) error {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": nodejoinv1alpha1.APIVersion,
		"kind":       "NodeAccessEntry",
		"metadata":   map[string]any{"name": nodeRole(cluster)},
		"spec":       map[string]any{"principalARN": roleARN, "type": string(nodejoinv1alpha1.AccessEntryEC2Linux)},
	}}
	_, err := dyn.Resource(nodejoinv1alpha1.NodeAccessEntryResource).Create(ctx, u, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the NodeAccessEntry for %s: %w", roleARN, err)
	}
	return nil
}

// launched is one instance `up` launches and when. inst is set once it started, inited
// once nodeadm (or the simulated kubelet) is done; err and step say what failed.
type launched struct {
	start time.Time

	mu     sync.Mutex
	inst   *instance.Instance
	inited bool
	err    error
	step   joinstatus.Step
}

func (l *launched) state() (*instance.Instance, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inst, l.inited, l.err
}

// launch starts n instances, a few at a time, and configures each. It returns at once;
// the instances fill in as they go, and done closes when all have.
func (w *workers) launch(ctx context.Context, n int, o nodeOptions, report func(l *launched, step joinstatus.Step, at time.Time)) (ls []*launched, done <-chan struct{}) {
	family, _ := instance.ParseAMIFamily(o.AMIFamily)
	out := make([]*launched, n)
	for i := range out {
		out[i] = &launched{}
	}
	parallel := 4
	if w.kubelet == instance.KubeletSim {
		parallel = 16
	}
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			l := out[i]
			l.mu.Lock()
			l.start = time.Now()
			l.mu.Unlock()
			spec := instance.Spec{
				InstanceType: o.InstanceType, AMIFamily: family, Identity: w.identity, BootstrapToken: w.token,
				Role: nodeRole(w.prov.ClusterName()), Kubelet: w.kubelet,
				KubeletFlags: o.KubeletFlags, CredentialsOf: w.instanceID(o.CredentialsOf), ClaimAddress: w.address(o.ClaimAddress),
			}
			inst, err := w.prov.Start(ctx, spec)
			l.mu.Lock()
			l.inst, l.err, l.step = inst, err, joinstatus.StepInstance
			l.mu.Unlock()
			report(l, joinstatus.StepInstance, time.Now())
			if err != nil {
				return
			}
			err = inst.Init(ctx, w.simRunner())
			l.mu.Lock()
			l.inited, l.err, l.step = err == nil, err, joinstatus.StepNodeadm
			l.mu.Unlock()
			report(l, joinstatus.StepNodeadm, time.Now())
		}()
	}
	ch := make(chan struct{})
	go func() {
		wg.Wait()
		close(ch)
	}()
	return out, ch
}

// waitReady follows the launched nodes' joins through the API until all are Ready,
// one fails, or the timeout passes, reporting each step once.
func (w *workers) waitReady(ctx context.Context, client kubernetes.Interface, ls []*launched, authenticated func(user string) bool,
	timeout time.Duration, pr *progressPrinter) ([]nodeSummary, error) {
	tr := joinstatus.NewTracker()
	deadline := time.Now().Add(timeout)
	bootstrap := w.identity == instance.IdentityBootstrapToken
	for {
		snap, err := joinstatus.Take(ctx, client)
		if err != nil {
			return nil, err
		}
		now := time.Now()
		allReady := true
		var failures []string
		for _, l := range ls {
			ready, failure, err := w.observe(l, snap, tr, now, bootstrap, authenticated, pr)
			if err != nil {
				return nil, err
			}
			allReady = allReady && ready
			if failure != "" {
				failures = append(failures, failure)
			}
		}
		pr.flush(false)
		if len(failures) > 0 {
			return nil, errors.New(strings.Join(failures, "\n"))
		}
		if allReady {
			var sum []nodeSummary
			for _, l := range ls {
				at, _ := tr.At(l.inst.NodeName, joinstatus.StepReady)
				sum = append(sum, nodeSummary{Node: l.inst.NodeName, Instance: l.inst.ID, IP: l.inst.IP, Kubelet: string(l.inst.Kubelet), ReadyAfter: at.Sub(l.start)})
			}
			return sum, nil
		}
		if now.After(deadline) {
			return nil, w.notReady(snap, ls, bootstrap, authenticated, timeout)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// observe reports one launched node's progress from a snapshot: whether every step is
// done, or a failure; err ends the wait (a simulated kubelet stopped).
func (w *workers) observe(l *launched, snap *joinstatus.Snapshot, tr *joinstatus.Tracker, now time.Time, bootstrap bool,
	authenticated func(string) bool, pr *progressPrinter) (ready bool, failure string, err error) {
	inst, inited, lerr := l.state()
	if lerr != nil {
		name := "an instance"
		if inst != nil {
			name = "node " + inst.NodeName
		}
		l.mu.Lock()
		step := l.step
		l.mu.Unlock()
		return false, fmt.Sprintf("%s: %s failed: %v", name, step, lerr), nil
	}
	if !inited {
		return false, "", nil
	}
	if ch := inst.SimDone(); ch != nil {
		select {
		case err := <-ch:
			return false, "", fmt.Errorf("node %s: the simulated kubelet stopped: %w", inst.NodeName, err)
		default:
		}
	}
	name := inst.NodeName
	if _, registered := snap.Nodes[name]; !registered && inst.Kubelet == instance.KubeletReal {
		// A kubelet that authenticated as another node never registers: say so at once
		// rather than at the timeout.
		if other, _ := foreignIdentity(filepath.Join(inst.Root, instance.KubeletLog), name); other != "" {
			return false, fmt.Sprintf("node %s (instance %s): %s failed: %s", name, inst.ID, joinstatus.StepAuthenticated, foreignIdentityReason(name, other)), nil
		}
	}
	ready = true
	var failures []string
	for _, st := range snap.NodeSteps(name, bootstrap, authenticated("system:node:"+name)) {
		switch st.State {
		case joinstatus.Done:
			if tr.Mark(name, st.Step, now) {
				pr.step(l, st.Step, now, st.Detail)
			}
		case joinstatus.Failed:
			ready = false
			failures = append(failures, fmt.Sprintf("node %s (instance %s): %s failed: %s", name, inst.ID, st.Step, st.Detail))
		default:
			ready = false
		}
	}
	return ready, strings.Join(failures, "\n"), nil
}

// notReady explains, for each node that is not Ready, the step it waits for and the
// kubelet's last error line.
func (w *workers) notReady(snap *joinstatus.Snapshot, ls []*launched, bootstrap bool, authenticated func(string) bool, timeout time.Duration) error {
	var lines []string
	for _, l := range ls {
		inst, inited, _ := l.state()
		if inst == nil || !inited {
			lines = append(lines, "an instance: still starting (nodeadm init not done)")
			continue
		}
		name := inst.NodeName
		for _, st := range snap.NodeSteps(name, bootstrap, authenticated("system:node:"+name)) {
			if st.State == joinstatus.Done {
				continue
			}
			line := fmt.Sprintf("node %s (instance %s): waiting for %s", name, l.inst.ID, st.Step)
			if st.Detail != "" {
				line += " (" + st.Detail + ")"
			}
			if l.inst.Kubelet == instance.KubeletReal {
				if e := kubeletEvidence(filepath.Join(l.inst.Root, instance.KubeletLog)); e != "" {
					line += "\n    kubelet: " + e
				}
			}
			lines = append(lines, line)
			break
		}
	}
	return fmt.Errorf("not every node was Ready after %s (`nodejoin diagnose node NAME` explains one):\n%s", timeout, strings.Join(lines, "\n"))
}

// instanceID resolves a node name or instance ID to the instance ID ("" stays "").
func (w *workers) instanceID(nameOrID string) string {
	for _, inst := range w.prov.Instances() {
		if inst.NodeName == nameOrID {
			return inst.ID
		}
	}
	return nameOrID
}

// address resolves a node name to its address (an address stays as it is).
func (w *workers) address(nameOrIP string) string {
	for _, inst := range w.prov.Instances() {
		if inst.NodeName == nameOrIP {
			return inst.IP
		}
	}
	return nameOrIP
}

// writeSummary adds rows to the state directory's summary.
func writeSummary(dir string, sum []nodeSummary) error {
	data, err := json.MarshalIndent(append(readSummary(dir), sum...), "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, nodesFile), append(data, '\n'), 0o600)
}

func readSummary(dir string) []nodeSummary {
	var sum []nodeSummary
	if data, err := os.ReadFile(filepath.Join(dir, nodesFile)); err == nil {
		_ = json.Unmarshal(data, &sum)
	}
	return sum
}

func printSummary(w io.Writer, sum []nodeSummary) {
	if len(sum) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tINSTANCE\tIP\tKUBELET\tREADY AFTER")
	for _, s := range sum {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Node, s.Instance, s.IP, s.Kubelet, s.ReadyAfter.Round(100*time.Millisecond))
	}
	_ = tw.Flush()
}

// progressPrinter shows the join's steps: a line per node and step for a few nodes, a
// line of counts every few seconds for many.
type progressPrinter struct {
	w       io.Writer
	perNode bool
	steps   []joinstatus.Step
	total   int

	mu      sync.Mutex
	counts  map[joinstatus.Step]int
	last    time.Time
	changed bool
}

func newProgressPrinter(w io.Writer, total int, bootstrap bool) *progressPrinter {
	return &progressPrinter{w: w, perNode: total <= 10, steps: joinstatus.Steps(bootstrap), total: total, counts: map[joinstatus.Step]int{}}
}

func (p *progressPrinter) step(l *launched, step joinstatus.Step, at time.Time, detail string) {
	inst, _, _ := l.state()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counts[step]++
	p.changed = true
	if !p.perNode {
		return
	}
	name := inst.NodeName
	switch step {
	case joinstatus.StepInstance:
		detail = fmt.Sprintf("%s  %s  %s kubelet", inst.ID, inst.IP, inst.Kubelet)
	case joinstatus.StepNodeadm:
		if inst.Kubelet == instance.KubeletSim {
			detail = "simulated kubelet started"
		} else {
			detail = "files written, containerd and kubelet running"
		}
	}
	fmt.Fprintf(p.w, " ✓ %-32s %-27s +%-6s %s\n", name, step, at.Sub(l.start).Round(100*time.Millisecond), detail)
}

func (p *progressPrinter) failed(l *launched) {
	inst, _, err := l.state()
	p.mu.Lock()
	defer p.mu.Unlock()
	name := "instance"
	if inst != nil {
		name = inst.NodeName
	}
	l.mu.Lock()
	step := l.step
	l.mu.Unlock()
	fmt.Fprintf(p.w, " ✗ %-32s %-27s %v\n", name, step, err)
}

// flush prints the counts when they changed (every 2 seconds at most, unless final).
func (p *progressPrinter) flush(final bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.perNode || !p.changed || (!final && time.Since(p.last) < 2*time.Second) {
		return
	}
	p.changed, p.last = false, time.Now()
	var parts []string
	for _, s := range p.steps {
		parts = append(parts, fmt.Sprintf("%s %d", s, p.counts[s]))
	}
	fmt.Fprintf(p.w, " • %d nodes: %s\n", p.total, strings.Join(parts, ", "))
}

// run launches o.Count nodes and waits until they are Ready.
func (w *workers) run(ctx context.Context, client kubernetes.Interface, o nodeOptions, cp *controlPlane, stateDir string, progress io.Writer) ([]nodeSummary, error) {
	start := time.Now()
	fmt.Fprintf(progress, " • launching %d %s node(s) (%s kubelet, %s identity, %s user data)\n", o.Count, o.InstanceType, w.kubelet, w.identity, familyName(o.AMIFamily))
	pr := newProgressPrinter(progress, o.Count, w.identity == instance.IdentityBootstrapToken)
	ls, launchedAll := w.launch(ctx, o.Count, o, func(l *launched, step joinstatus.Step, at time.Time) {
		if _, _, err := l.state(); err != nil {
			pr.failed(l)
			return
		}
		pr.step(l, step, at, "")
	})
	sum, err := w.waitReady(ctx, client, ls, cp.Authenticated, o.Timeout, pr)
	// Launches still under way must end before the caller stops the provider.
	<-launchedAll
	pr.flush(true)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, " ✓ %d node(s) Ready (%s)\n", len(sum), since(start))
	return sum, writeSummary(stateDir, sum)
}

func familyName(s string) string {
	f, err := instance.ParseAMIFamily(s)
	if err != nil {
		return s
	}
	return string(f)
}

func since(t time.Time) string { return time.Since(t).Round(100 * time.Millisecond).String() }

// stop terminates every instance.
func (w *workers) stop(ctx context.Context) error {
	if w == nil {
		return nil
	}
	return w.prov.Close(ctx)
}

func (o *nodeOptions) validate() error {
	if o.Count < 0 {
		return fmt.Errorf("--nodes %d: want 0 or more", o.Count)
	}
	if _, err := instance.ParseAMIFamily(o.AMIFamily); err != nil {
		return fmt.Errorf("--ami-family: %w", err)
	}
	if o.Identity != string(instance.IdentityAWSIAM) && o.Identity != string(instance.IdentityBootstrapToken) {
		return fmt.Errorf("--identity %q: want aws-iam or bootstrap-token", o.Identity)
	}
	if o.Kubelet != "" && o.Kubelet != "real" && o.Kubelet != "sim" {
		return fmt.Errorf("--kubelet %q: want real or sim", o.Kubelet)
	}
	if o.Timeout == 0 {
		o.Timeout = 5*time.Minute + time.Duration(o.Count)*2*time.Second
	}
	return nil
}
