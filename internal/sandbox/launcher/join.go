package launcher

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"

	"github.com/nodejoin/nodejoin/internal/sandbox/instance"
	"github.com/nodejoin/nodejoin/internal/sandbox/joinlog"
	"github.com/nodejoin/nodejoin/internal/sandbox/joinstatus"
	"github.com/nodejoin/nodejoin/internal/sandbox/progress"
)

// Request says which nodes Run launches.
type Request struct {
	Count        int
	InstanceType string
	AMIFamily    nodejoinv1alpha1.AMIFamily
	KubeletFlags []string
	// CredentialsOf is another node (name or instance ID) whose role credentials the
	// new instances' metadata endpoints serve.
	CredentialsOf string
	// ClaimAddress is another node (name or address) whose address the kubelets claim.
	ClaimAddress string
	Timeout      time.Duration
	// UserData, when set, is the instances' user data instead of the family's: template
	// text whose UserDataFields Run fills in, or gzip data it passes on untouched; an
	// empty AMIFamily is then read from it (SniffFamily). UserDataSource names it in
	// errors.
	UserData       []byte
	UserDataSource string
}

// Node is a node Run launched and how long it took to become Ready.
type Node struct {
	Name         string  `json:"name"`
	InstanceID   string  `json:"instanceID"`
	IP           string  `json:"ip"`
	Kubelet      string  `json:"kubelet"`
	ReadySeconds float64 `json:"readySeconds"`
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
func (lr *Launcher) launch(ctx context.Context, o Request, report func(l *launched, step joinstatus.Step, at time.Time)) (ls []*launched, done <-chan struct{}) {
	family := o.AMIFamily
	out := make([]*launched, o.Count)
	for i := range out {
		out[i] = &launched{}
	}
	parallel := 4
	if lr.kubelet == instance.KubeletSim {
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
				InstanceType: o.InstanceType, AMIFamily: family, Identity: lr.identity, BootstrapToken: lr.token,
				Role: NodeRole(lr.prov.ClusterName()), Kubelet: lr.kubelet,
				KubeletFlags: o.KubeletFlags, CredentialsOf: lr.instanceID(o.CredentialsOf), ClaimAddress: lr.address(o.ClaimAddress),
				UserData: o.UserData, Tags: nodeTags(lr.prov.ClusterName()),
			}
			inst, err := lr.prov.Start(ctx, spec)
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
			err = inst.Init(ctx, lr.simRunner())
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
func (lr *Launcher) waitReady(ctx context.Context, ls []*launched, timeout time.Duration, pr *joinProgress) ([]Node, error) {
	tr := joinstatus.NewTracker()
	deadline := time.Now().Add(timeout)
	for {
		snap, err := joinstatus.Take(ctx, lr.client)
		if err != nil {
			return nil, err
		}
		now := time.Now()
		allReady := true
		var failures []string
		for _, l := range ls {
			ready, failure, err := lr.observe(l, snap, tr, now, pr)
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
			return nil, lr.notReady(snap, ls, timeout)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func (lr *Launcher) bootstrap() bool { return lr.identity == instance.IdentityBootstrapToken }

// observe reports one launched node's progress from a snapshot: whether every step is
// done, or a failure; err ends the wait (a simulated kubelet stopped).
func (lr *Launcher) observe(l *launched, snap *joinstatus.Snapshot, tr *joinstatus.Tracker, now time.Time, pr *joinProgress) (ready bool, failure string, err error) {
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
		if other, _ := joinlog.ForeignIdentity(filepath.Join(inst.Root, instance.KubeletLog), name); other != "" {
			return false, fmt.Sprintf("node %s (instance %s): %s failed: %s", name, inst.ID, joinstatus.StepAuthenticated, joinlog.ForeignIdentityReason(name, other)), nil
		}
	}
	ready = true
	var failures []string
	for _, st := range snap.InstanceSteps(name, inst.ID, lr.bootstrap(), lr.ctl.Authenticated("system:node:"+name)) {
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
func (lr *Launcher) notReady(snap *joinstatus.Snapshot, ls []*launched, timeout time.Duration) error {
	var lines []string
	for _, l := range ls {
		cur := l.state()
		inst := cur.inst
		if inst == nil || !cur.inited {
			lines = append(lines, "an instance: still starting (nodeadm init not done)")
			continue
		}
		name := inst.NodeName
		for _, st := range snap.InstanceSteps(name, inst.ID, lr.bootstrap(), lr.ctl.Authenticated("system:node:"+name)) {
			if st.State == joinstatus.Done {
				continue
			}
			line := fmt.Sprintf("node %s (instance %s): waiting for %s", name, inst.ID, st.Step)
			if st.Detail != "" {
				line += " (" + st.Detail + ")"
			}
			if inst.Kubelet == instance.KubeletReal {
				if e := joinlog.KubeletEvidence(filepath.Join(inst.Root, instance.KubeletLog)); e != "" {
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
func (lr *Launcher) instanceID(nameOrID string) string {
	for _, inst := range lr.prov.Instances() {
		if inst.NodeName == nameOrID {
			return inst.ID
		}
	}
	return nameOrID
}

// address resolves a node name to its address (an address stays as it is).
func (lr *Launcher) address(nameOrIP string) string {
	for _, inst := range lr.prov.Instances() {
		if inst.NodeName == nameOrIP {
			return inst.IP
		}
	}
	return nameOrIP
}

// Run launches o.Count nodes and waits until they are Ready.
func (lr *Launcher) Run(ctx context.Context, o Request, rep *progress.Reporter) ([]Node, error) {
	start := time.Now()
	if len(o.UserData) > 0 {
		fields, err := lr.userDataFields(lr.kubelet)
		if err != nil {
			return nil, err
		}
		if o.UserData, err = RenderUserData(o.UserDataSource, o.UserData, fields); err != nil {
			return nil, err
		}
		if o.AMIFamily == "" {
			o.AMIFamily = SniffFamily(o.UserData)
		}
	}
	userData := string(o.AMIFamily) + " user data"
	if len(o.UserData) > 0 {
		userData += " from " + o.UserDataSource
	}
	rep.Report(progress.Event{Kind: progress.StepStarted, Step: fmt.Sprintf("launching %d %s node(s) (%s kubelet, %s identity, %s)",
		o.Count, o.InstanceType, lr.kubelet, lr.identity, userData)})
	pr := newJoinProgress(rep, o.Count, lr.bootstrap())
	ls, launchedAll := lr.launch(ctx, o, func(l *launched, step joinstatus.Step, at time.Time) {
		if l.state().err != nil {
			pr.failed(l)
			return
		}
		pr.step(l, step, at, "")
	})
	nodes, err := lr.waitReady(ctx, ls, o.Timeout, pr)
	// Launches still under way must end before the caller stops the provider.
	<-launchedAll
	pr.flush(true)
	if err != nil {
		return nil, err
	}
	rep.Report(progress.Event{Kind: progress.StepDone, Step: fmt.Sprintf("%d node(s) Ready", len(nodes)), Elapsed: time.Since(start)})
	return nodes, nil
}
