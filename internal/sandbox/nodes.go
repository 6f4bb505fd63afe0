package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/atomicfile"
	"github.com/nodejoin/nodejoin/internal/bootstraptoken"
	"github.com/nodejoin/nodejoin/internal/controlplane"
	"github.com/nodejoin/nodejoin/internal/sandbox/controller"
	"github.com/nodejoin/nodejoin/internal/sandbox/instance"
	"github.com/nodejoin/nodejoin/internal/sandbox/joinstatus"
	"github.com/nodejoin/nodejoin/internal/toolbin"
)

// nodesFile records, in the state directory, the nodes launched and how long each took
// to become Ready.
const nodesFile = "nodes.json"

// nodeRole is the instance role of a cluster's local instances.
func nodeRole(cluster string) string { return "nodejoin-" + cluster + "-node" }

// workers are a cluster's local instances, run by the process that runs the cluster.
type workers struct {
	prov      *instance.Provider
	client    kubernetes.Interface
	ctl       *controller.Controller
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
		return "", "", &OptionError{"kubelet", asked, "want real or sim"}
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
func startWorkers(ctx context.Context, s *Sandbox, o NodeOptions, rep *reporter) (*workers, error) {
	c := s.cluster
	kind, why, err := resolveKubelet(o.Kubelet, c.Options().Network)
	if err != nil {
		return nil, err
	}
	if why != "" {
		rep.note(why)
	}
	nodeadm, err := nodeadmPath()
	if err != nil {
		return nil, err
	}
	binDir := s.opts.BinDir
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
	images := func() ([]string, error) { return imageArchives(binDir, c.StateDir()) }
	if kind == instance.KubeletReal {
		if a, err := images(); err == nil && len(a) == 0 {
			rep.note("no image archives in " + filepath.Join(binDir, "images") + " (`make images` builds them): pods on the nodes cannot start until images are loaded")
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
		Cloud:        s.controller.Cloud(),
		EC2Endpoint:  s.controller.EC2InternalURL(),
		Zone:         controller.DefaultRegion + "a",
		NodeadmPath:  nodeadm, KubeletPath: kubeletPath, ContainerdPath: containerdPath,
		ImageArchives: images,
		Log:           s.log,
	})
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		return nil, err
	}
	w := &workers{prov: prov, client: client, ctl: s.controller, kubelet: kind, identity: instance.Identity(o.Identity),
		simLogDir: filepath.Join(c.StateDir(), "logs", "kubeletsim")}
	switch w.identity {
	case instance.IdentityAWSIAM:
		dyn, err := dynamic.NewForConfig(c.RESTConfig())
		if err == nil {
			err = ensureAccessEntry(ctx, dyn, nodeRole(c.Name()), prov.RoleARN(nodeRole(c.Name())))
		}
		if err != nil {
			return nil, errors.Join(err, prov.Close(ctx))
		}
	case instance.IdentityBootstrapToken:
		if w.token, err = bootstraptoken.Mint(ctx, client, "local", 24*time.Hour, time.Now()); err != nil {
			return nil, errors.Join(fmt.Errorf("minting a bootstrap token: %w", err), prov.Close(ctx))
		}
	}
	return w, nil
}

// ensureAccessEntry maps an instance role to the node identity, as an EKS access entry
// of type EC2_LINUX does, in the NodeAccessEntry name.
func ensureAccessEntry(ctx context.Context, dyn dynamic.Interface, name, roleARN string) error {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": nodejoinv1alpha1.APIVersion,
		"kind":       "NodeAccessEntry",
		"metadata":   map[string]any{"name": name},
		"spec":       map[string]any{"principalARN": roleARN, "type": string(nodejoinv1alpha1.AccessEntryEC2Linux)},
	}}
	_, err := dyn.Resource(nodejoinv1alpha1.NodeAccessEntryResource).Create(ctx, u, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the NodeAccessEntry for %s: %w", roleARN, err)
	}
	return nil
}

// launched is one instance being launched. inst is set once it started, inited once
// nodeadm (or the simulated kubelet) is done; err and step say what failed.
type launched struct {
	start time.Time

	mu     sync.Mutex
	inst   *instance.Instance
	inited bool
	err    error
	step   joinstatus.Step
	images int // image archives imported
}

// stepImages is a real node's image import, between its launch and nodeadm init.
const stepImages joinstatus.Step = "images imported"

// launchState is a launched instance's state at one moment.
type launchState struct {
	inst   *instance.Instance
	inited bool
	err    error
	step   joinstatus.Step
}

func (l *launched) state() launchState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return launchState{l.inst, l.inited, l.err, l.step}
}

// launch starts n instances, a few at a time, and configures each. It returns at once;
// the instances fill in as they go, and done closes when all have.
func (w *workers) launch(ctx context.Context, o NodeOptions, report func(l *launched, step joinstatus.Step, at time.Time)) (ls []*launched, done <-chan struct{}) {
	family := nodejoinv1alpha1.AMIFamily(o.AMIFamily) // parsed by NodeOptions.Validate
	out := make([]*launched, o.Count)
	for i := range out {
		out[i] = &launched{}
	}
	parallel := 4
	if w.kubelet == instance.KubeletSim {
		parallel = 16
	}
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for _, l := range out {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
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
			if inst.Kubelet == instance.KubeletReal {
				archives, err := inst.ImportImages(ctx)
				l.mu.Lock()
				l.images, l.err, l.step = len(archives), err, stepImages
				l.mu.Unlock()
				if err != nil || len(archives) > 0 {
					report(l, stepImages, time.Now())
				}
				if err != nil {
					return
				}
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
func (w *workers) waitReady(ctx context.Context, ls []*launched, timeout time.Duration, pr *joinProgress) ([]Node, error) {
	tr := joinstatus.NewTracker()
	deadline := time.Now().Add(timeout)
	for {
		snap, err := joinstatus.Take(ctx, w.client)
		if err != nil {
			return nil, err
		}
		now := time.Now()
		allReady := true
		var failures []string
		for _, l := range ls {
			ready, failure, err := w.observe(l, snap, tr, now, pr)
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
			var nodes []Node
			for _, l := range ls {
				at, _ := tr.At(l.inst.NodeName, joinstatus.StepReady)
				nodes = append(nodes, Node{Name: l.inst.NodeName, InstanceID: l.inst.ID, IP: l.inst.IP, Kubelet: string(l.inst.Kubelet),
					ReadySeconds: at.Sub(l.start).Round(100 * time.Millisecond).Seconds()})
			}
			return nodes, nil
		}
		if now.After(deadline) {
			return nil, w.notReady(snap, ls, timeout)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func (w *workers) bootstrap() bool { return w.identity == instance.IdentityBootstrapToken }

// observe reports one launched node's progress from a snapshot: whether every step is
// done, or a failure; err ends the wait (a simulated kubelet stopped).
func (w *workers) observe(l *launched, snap *joinstatus.Snapshot, tr *joinstatus.Tracker, now time.Time, pr *joinProgress) (ready bool, failure string, err error) {
	ls := l.state()
	inst := ls.inst
	if ls.err != nil {
		name := "an instance"
		if inst != nil {
			name = "node " + inst.NodeName
		}
		return false, fmt.Sprintf("%s: %s failed: %v", name, ls.step, ls.err), nil
	}
	if !ls.inited {
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
	for _, st := range snap.NodeSteps(name, w.bootstrap(), w.ctl.Authenticated("system:node:"+name)) {
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
func (w *workers) notReady(snap *joinstatus.Snapshot, ls []*launched, timeout time.Duration) error {
	var lines []string
	for _, l := range ls {
		cur := l.state()
		inst := cur.inst
		if inst == nil || !cur.inited {
			lines = append(lines, "an instance: still starting (nodeadm init not done)")
			continue
		}
		name := inst.NodeName
		for _, st := range snap.NodeSteps(name, w.bootstrap(), w.ctl.Authenticated("system:node:"+name)) {
			if st.State == joinstatus.Done {
				continue
			}
			line := fmt.Sprintf("node %s (instance %s): waiting for %s", name, inst.ID, st.Step)
			if st.Detail != "" {
				line += " (" + st.Detail + ")"
			}
			if inst.Kubelet == instance.KubeletReal {
				if e := kubeletEvidence(filepath.Join(inst.Root, instance.KubeletLog)); e != "" {
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

// run launches o.Count nodes and waits until they are Ready.
func (w *workers) run(ctx context.Context, o NodeOptions, rep *reporter) ([]Node, error) {
	start := time.Now()
	rep.report(Event{Kind: StepStarted, Step: fmt.Sprintf("launching %d %s node(s) (%s kubelet, %s identity, %s user data)",
		o.Count, o.InstanceType, w.kubelet, w.identity, o.AMIFamily)})
	pr := newJoinProgress(rep, o.Count, w.bootstrap())
	ls, launchedAll := w.launch(ctx, o, func(l *launched, step joinstatus.Step, at time.Time) {
		if l.state().err != nil {
			pr.failed(l)
			return
		}
		pr.step(l, step, at, "")
	})
	nodes, err := w.waitReady(ctx, ls, o.Timeout, pr)
	// Launches still under way must end before the caller stops the provider.
	<-launchedAll
	pr.flush(true)
	if err != nil {
		return nil, err
	}
	rep.report(Event{Kind: StepDone, Step: fmt.Sprintf("%d node(s) Ready", len(nodes)), Elapsed: time.Since(start)})
	return nodes, nil
}

// stop terminates every instance.
func (w *workers) stop(ctx context.Context) error { return w.prov.Close(ctx) }

// writeNodes records the nodes in the state directory.
func writeNodes(dir string, nodes []Node) error {
	if nodes == nil {
		nodes = []Node{}
	}
	data, err := json.MarshalIndent(nodes, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, nodesFile), append(data, '\n'), 0o600)
}

// readNodes reads what writeNodes recorded.
func readNodes(dir string) []Node {
	nodes := []Node{}
	if data, err := os.ReadFile(filepath.Join(dir, nodesFile)); err == nil {
		_ = json.Unmarshal(data, &nodes)
	}
	return nodes
}

// joinProgress reports the join's steps: an event per node and step for a few nodes, a
// count every few seconds for many.
type joinProgress struct {
	rep     *reporter
	perNode bool
	steps   []joinstatus.Step
	total   int

	mu      sync.Mutex
	counts  map[joinstatus.Step]int
	last    time.Time
	changed bool
}

func newJoinProgress(rep *reporter, total int, bootstrap bool) *joinProgress {
	return &joinProgress{rep: rep, perNode: total <= 10, steps: joinstatus.Steps(bootstrap), total: total, counts: map[joinstatus.Step]int{}}
}

func (p *joinProgress) step(l *launched, step joinstatus.Step, at time.Time, detail string) {
	inst := l.state().inst
	l.mu.Lock()
	start := l.start
	l.mu.Unlock()
	p.mu.Lock()
	p.counts[step]++
	p.changed = true
	p.mu.Unlock()
	if !p.perNode {
		return
	}
	switch step {
	case joinstatus.StepInstance:
		detail = fmt.Sprintf("%s  %s  %s kubelet", inst.ID, inst.IP, inst.Kubelet)
	case stepImages:
		l.mu.Lock()
		detail = fmt.Sprintf("%d image archive(s) in containerd", l.images)
		l.mu.Unlock()
	case joinstatus.StepNodeadm:
		if inst.Kubelet == instance.KubeletSim {
			detail = "simulated kubelet started"
		} else {
			detail = "files written, containerd and kubelet running"
		}
	}
	p.rep.report(Event{Kind: NodeStep, Node: inst.NodeName, Step: string(step), Elapsed: at.Sub(start), Detail: detail})
}

func (p *joinProgress) failed(l *launched) {
	st := l.state()
	name := "instance"
	if st.inst != nil {
		name = st.inst.NodeName
	}
	p.rep.report(Event{Kind: NodeFailed, Node: name, Step: string(st.step), Detail: st.err.Error()})
}

// flush reports the counts when they changed (every 2 seconds at most, unless final).
func (p *joinProgress) flush(final bool) {
	p.mu.Lock()
	if p.perNode || !p.changed || (!final && time.Since(p.last) < 2*time.Second) {
		p.mu.Unlock()
		return
	}
	p.changed, p.last = false, time.Now()
	counts := make([]StepCount, 0, len(p.steps))
	for _, s := range p.steps {
		counts = append(counts, StepCount{Step: string(s), Nodes: p.counts[s]})
	}
	p.mu.Unlock()
	p.rep.report(Event{Kind: NodeCounts, Total: p.total, Counts: counts})
}
