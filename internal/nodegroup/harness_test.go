package nodegroup

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/nodegroup/userdata"
)

// recorder keeps the events it is given.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) Eventf(_ runtime.Object, _ runtime.Object, typ, reason, _ string, note string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, typ+" "+reason+": "+fmt.Sprintf(note, args...))
}

func (r *recorder) has(reason string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.events, func(e string) bool { return strings.Contains(e, " "+reason+":") })
}

// workload is a Deployment-like set of pods the harness keeps at replicas.
type workload struct {
	name     string
	replicas int
	// minAvailable is its PodDisruptionBudget's (0: none); minHealthy the fewest of
	// its pods seen running on Ready nodes, before the scheduler replaces lost ones.
	minAvailable, minHealthy int
}

// harness runs the reconciler against the fake cloud and a fake API, with simulated
// kubelets (an instance's Node registers joinDelay steps after launch, Ready) and a
// simulated scheduler that keeps each workload's replicas on schedulable Ready nodes.
// Every step advances a fake clock by 5 s and checks the update invariants. The clock
// starts at the real time, as the fake API stamps deletionTimestamp with it.
type harness struct {
	t         *testing.T
	now       time.Time
	cloud     *fakeCloud
	client    client.Client
	rec       *recorder
	r         *Reconciler
	name      string
	step      int
	launched  map[string]int // instance -> step first seen by the kubelets
	broken    map[string]bool
	breakAll  bool
	joinDelay int
	workloads []workload
	// restart makes a new Reconciler before every step.
	restart bool
	// maxInFlight is the most nodes an update took out at once; minAvail the fewest
	// available (Ready, not taken out) nodes seen during an update.
	maxInFlight int
	minAvail    int
	ltMax       int32
	podSeq      int
	// lostPods are pods whose node went away under them: not evicted, not deleted.
	lostPods []string
	// real: the API is a real kube-apiserver; the harness then also plays the
	// disruption controller (PDB status) and the kubelet's confirmation of deletions.
	real bool
	pdbs map[string]int // name -> minAvailable
	// ctrl, when set, is the reconciler's client (else client).
	ctrl client.Client
}

const testCluster = "c1"

func baseGroup(desired int32) *v1alpha1.NodeGroup {
	return &v1alpha1.NodeGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "ng1", UID: "3f6c2b1e-0000-4000-8000-000000000001"},
		Spec: v1alpha1.NodeGroupSpec{
			Scaling:  v1alpha1.ScalingConfig{MinSize: 1, MaxSize: 6, DesiredSize: ptr.To(desired)},
			Template: v1alpha1.NodeTemplate{AMIFamily: v1alpha1.AMIFamilyAmazonLinux2023, InstanceTypes: []string{"m5.large"}},
		},
	}
}

func testScheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// newRealHarness runs the harness against a real API server: c talks to it, and the
// reconciler through ctrl when it is not nil.
func newRealHarness(t *testing.T, ng *v1alpha1.NodeGroup, c, ctrl client.Client) *harness {
	t.Helper()
	h := &harness{t: t, now: time.Now().Truncate(time.Second), rec: &recorder{}, name: ng.Name,
		launched: map[string]int{}, broken: map[string]bool{}, joinDelay: 3, minAvail: 1 << 30, real: true, pdbs: map[string]int{}}
	h.cloud = newFakeCloud(func() time.Time { return h.now })
	h.client, h.ctrl = c, ctrl
	if err := c.Create(context.Background(), ng); err != nil {
		t.Fatal(err)
	}
	h.newReconciler()
	return h
}

func newHarness(t *testing.T, ng *v1alpha1.NodeGroup) *harness {
	t.Helper()
	h := &harness{t: t, now: time.Now().Truncate(time.Second), rec: &recorder{}, name: ng.Name,
		launched: map[string]int{}, broken: map[string]bool{}, joinDelay: 3, minAvail: 1 << 30}
	h.cloud = newFakeCloud(func() time.Time { return h.now })
	h.client = fake.NewClientBuilder().WithScheme(testScheme(t)).
		WithStatusSubresource(&v1alpha1.NodeGroup{}).
		WithIndex(&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).
		WithInterceptorFuncs(interceptor.Funcs{SubResourceCreate: h.evict}).
		WithObjects(ng).Build()
	h.newReconciler()
	return h
}

func (h *harness) newReconciler() {
	c := h.client
	if h.ctrl != nil {
		c = h.ctrl
	}
	r, err := New(c, c, h.rec, Options{
		EC2: h.cloud, AutoScaling: h.cloud, AvailabilityZones: []string{"us-west-2a", "us-west-2b"},
		Cluster: userdata.Cluster{Name: testCluster, Endpoint: "https://127.0.0.1:6443", CertificateAuthority: []byte("ca"), ServiceCIDR: "10.100.0.0/16"},
		AMIs:    map[v1alpha1.AMIFamily]string{v1alpha1.AMIFamilyAmazonLinux2023: "ami-0123456789abcdef0"},
		ReleaseImage: func(ami string) (v1alpha1.AMIFamily, bool) {
			return v1alpha1.AMIFamilyAmazonLinux2023, ami == "ami-0123456789abcdef0" || ami == olderRelease
		},
		Now: func() time.Time { return h.now },
	})
	if err != nil {
		h.t.Fatal(err)
	}
	h.r = r
}

// evict is the Eviction API as the API server serves it: refused with 429 when a
// PodDisruptionBudget selecting the pod would drop below minAvailable.
func (h *harness) evict(ctx context.Context, c client.Client, sub string, obj client.Object, subObj client.Object, opts ...client.SubResourceCreateOption) error {
	if sub != "eviction" {
		return c.SubResource(sub).Create(ctx, obj, subObj, opts...)
	}
	pod := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), pod); err != nil {
		return err
	}
	var pdbs policyv1.PodDisruptionBudgetList
	if err := c.List(ctx, &pdbs, client.InNamespace(pod.Namespace)); err != nil {
		return err
	}
	for _, b := range pdbs.Items {
		sel, _ := metav1.LabelSelectorAsSelector(b.Spec.Selector)
		if !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		if h.healthy(ctx, sel)-1 < b.Spec.MinAvailable.IntValue() {
			return apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
		}
	}
	return c.SubResource(sub).Create(ctx, obj, subObj, opts...)
}

// healthy counts the pods sel selects that run on a Ready node.
func (h *harness) healthy(ctx context.Context, sel labels.Selector) int {
	var pods corev1.PodList
	if err := h.client.List(ctx, &pods, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		h.t.Fatal(err)
	}
	n := 0
	for _, p := range pods.Items {
		node := &corev1.Node{}
		if p.DeletionTimestamp == nil && h.client.Get(ctx, types.NamespacedName{Name: p.Spec.NodeName}, node) == nil && nodeReady(node) {
			n++
		}
	}
	return n
}

func (h *harness) get() *v1alpha1.NodeGroup {
	ng := &v1alpha1.NodeGroup{}
	if err := h.client.Get(context.Background(), types.NamespacedName{Name: h.name}, ng); err != nil {
		h.t.Fatal(err)
	}
	return ng
}

func (h *harness) mutate(f func(*v1alpha1.NodeGroup)) {
	ng := h.get()
	f(ng)
	ng.Generation++
	if err := h.client.Update(context.Background(), ng); err != nil {
		h.t.Fatal(err)
	}
}

// tick runs one reconcile and lets the world move on.
func (h *harness) tick() {
	h.t.Helper()
	ctx := context.Background()
	if h.restart {
		h.newReconciler()
	}
	if _, err := h.r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: h.name}}); err != nil {
		h.t.Fatalf("step %d: Reconcile: %v", h.step, err)
	}
	h.check()
	h.cloud.converge()
	h.kubelets()
	for i := range h.workloads {
		w := &h.workloads[i]
		w.minHealthy = min(w.minHealthy, h.healthy(ctx, labels.SelectorFromSet(labels.Set{"app": w.name})))
	}
	h.schedule()
	if h.real {
		h.disruption()
	}
	h.now = h.now.Add(5 * time.Second)
	h.step++
}

// until ticks until cond holds, failing after max steps.
func (h *harness) until(what string, max int, cond func(*v1alpha1.NodeGroup) bool) {
	h.t.Helper()
	for range max {
		if cond(h.get()) {
			return
		}
		h.tick()
	}
	ng := h.get()
	h.t.Fatalf("after %d steps: still not %s; status %+v\nupdate %+v\nevents:\n%s", max, what, ng.Status, ng.Status.Update, strings.Join(h.rec.events, "\n"))
}

// check asserts the update invariants: at most maxUnavailable nodes taken out, and
// never fewer than desired - maxUnavailable available nodes.
func (h *harness) check() {
	h.t.Helper()
	ng := &v1alpha1.NodeGroup{}
	if err := h.client.Get(context.Background(), types.NamespacedName{Name: h.name}, ng); apierrors.IsNotFound(err) {
		return
	}
	if g := h.cloud.group(); g != nil {
		h.ltMax = max(h.ltMax, g.max)
	}
	u := ng.Status.Update
	if u == nil || u.Phase == v1alpha1.UpdatePhaseSetup {
		return
	}
	h.maxInFlight = max(h.maxInFlight, len(u.Nodes))
	if int32(len(u.Nodes)) > u.MaxUnavailable { //nolint:gosec // G115: a test's handful of nodes.
		h.t.Fatalf("step %d: %d nodes taken out, maxUnavailable %d: %+v", h.step, len(u.Nodes), u.MaxUnavailable, u.Nodes)
	}
	avail := 0
	g := h.cloud.group()
	for _, i := range g.instances {
		if i.state != "InService" || slices.ContainsFunc(u.Nodes, func(n v1alpha1.UpdateNode) bool { return n.InstanceID == i.id }) {
			continue
		}
		node := &corev1.Node{}
		if h.client.Get(context.Background(), types.NamespacedName{Name: nodeName(i.id)}, node) == nil && nodeReady(node) {
			avail++
		}
	}
	h.minAvail = min(h.minAvail, avail)
	desired := int(ng.Spec.Scaling.Desired())
	if desired-avail > int(u.MaxUnavailable) {
		h.t.Fatalf("step %d: %d of %d nodes available, maxUnavailable %d (phase %s, nodes %+v)", h.step, avail, desired, u.MaxUnavailable, u.Phase, u.Nodes)
	}
}

func nodeName(instance string) string { return "ip-" + strings.TrimPrefix(instance, "i-") }

// kubelets registers a Ready Node for each instance joinDelay steps after launch
// (never for broken ones), and removes the Nodes and pods of instances that are gone.
func (h *harness) kubelets() {
	ctx := context.Background()
	live := map[string]bool{}
	if g := h.cloud.group(); g != nil {
		for _, i := range g.instances {
			if i.state != "InService" {
				continue
			}
			live[i.id] = true
			if _, ok := h.launched[i.id]; !ok {
				h.launched[i.id] = h.step
				if h.breakAll {
					h.broken[i.id] = true
				}
			}
			if h.broken[i.id] || h.step-h.launched[i.id] < h.joinDelay {
				continue
			}
			n := &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: nodeName(i.id), Labels: map[string]string{v1alpha1.LabelNodeGroup: h.name, "version": i.version}},
				Spec:       corev1.NodeSpec{ProviderID: "aws:///" + i.az + "/" + i.id},
				Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}},
			}
			if err := h.client.Create(ctx, n); err != nil && !apierrors.IsAlreadyExists(err) {
				h.t.Fatal(err)
			}
		}
	}
	var nodes corev1.NodeList
	if err := h.client.List(ctx, &nodes); err != nil {
		h.t.Fatal(err)
	}
	for _, n := range nodes.Items {
		if live[instanceID(n.Spec.ProviderID)] || n.Labels[foreignLabel] != "" {
			continue // foreign: another group's or a control-plane Node, not the group's kubelets'
		}
		if err := h.client.Delete(ctx, &n); err != nil && !apierrors.IsNotFound(err) {
			h.t.Fatal(err)
		}
	}
	var pods corev1.PodList
	if err := h.client.List(ctx, &pods); err != nil {
		h.t.Fatal(err)
	}
	for _, p := range pods.Items {
		// The kubelet confirms deletions (a real API server waits for it); pods of
		// nodes that are gone are collected.
		err := h.client.Get(ctx, types.NamespacedName{Name: p.Spec.NodeName}, &corev1.Node{})
		if p.DeletionTimestamp == nil && apierrors.IsNotFound(err) {
			h.lostPods = append(h.lostPods, p.Name+" on "+p.Spec.NodeName)
		}
		if p.DeletionTimestamp != nil || apierrors.IsNotFound(err) {
			_ = h.client.Delete(ctx, &p, client.GracePeriodSeconds(0))
		}
	}
}

// schedule keeps every workload at its replicas, on the schedulable Ready node with
// the fewest of its pods.
func (h *harness) schedule() {
	ctx := context.Background()
	var nodes corev1.NodeList
	if err := h.client.List(ctx, &nodes); err != nil {
		h.t.Fatal(err)
	}
	for _, w := range h.workloads {
		var pods corev1.PodList
		if err := h.client.List(ctx, &pods, client.MatchingLabels{"app": w.name}); err != nil {
			h.t.Fatal(err)
		}
		per := map[string]int{}
		for _, p := range pods.Items {
			per[p.Spec.NodeName]++
		}
		for n := len(pods.Items); n < w.replicas; n++ {
			best := ""
			for _, node := range nodes.Items {
				if node.Spec.Unschedulable || !nodeReady(&node) {
					continue
				}
				if best == "" || per[node.Name] < per[best] {
					best = node.Name
				}
			}
			if best == "" {
				return
			}
			per[best]++
			h.podSeq++
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("%s-%d", w.name, h.podSeq),
				Labels: map[string]string{"app": w.name}}, Spec: corev1.PodSpec{NodeName: best,
				Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}}
			if err := h.client.Create(ctx, p); err != nil {
				h.t.Fatal(err)
			}
			if h.real {
				// The kubelet runs it: the Eviction API lets Pending pods go whatever
				// the budget says, so they must be Running and Ready.
				p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
				if err := h.client.Status().Update(ctx, p); err != nil {
					h.t.Fatal(err)
				}
			}
		}
	}
}

func (h *harness) addWorkload(name string, replicas, minAvailable int) {
	h.workloads = append(h.workloads, workload{name: name, replicas: replicas, minAvailable: minAvailable, minHealthy: replicas})
	if minAvailable > 0 {
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(int32(minAvailable))), //nolint:gosec // G115: a test's handful of nodes.
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}}}
		if err := h.client.Create(context.Background(), pdb); err != nil {
			h.t.Fatal(err)
		}
		if h.real {
			h.pdbs[name] = minAvailable
		}
	}
	h.schedule()
	if h.real {
		h.disruption()
	}
}

// disruption writes each PodDisruptionBudget's status as kube-controller-manager's
// disruption controller does; the Eviction API decides from it.
func (h *harness) disruption() {
	ctx := context.Background()
	for _, name := range sortedKeys(h.pdbs) {
		pdb := &policyv1.PodDisruptionBudget{}
		if err := h.client.Get(ctx, types.NamespacedName{Namespace: "default", Name: name}, pdb); err != nil {
			h.t.Fatal(err)
		}
		sel, _ := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		healthy, want := h.healthy(ctx, sel), pdb.Spec.MinAvailable.IntValue()
		pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, CurrentHealthy: int32(healthy), DesiredHealthy: int32(want), //nolint:gosec // G115: a test's handful of nodes.
			ExpectedPods: int32(healthy), DisruptionsAllowed: int32(max(0, healthy-want))} //nolint:gosec // G115: a test's handful of nodes.
		if err := h.client.Status().Update(ctx, pdb); err != nil && !apierrors.IsConflict(err) {
			h.t.Fatal(err)
		}
	}
}

func (h *harness) setPDB(name string, minAvailable int) {
	pdb := &policyv1.PodDisruptionBudget{}
	if err := h.client.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: name}, pdb); err != nil {
		h.t.Fatal(err)
	}
	pdb.Spec.MinAvailable = ptr.To(intstr.FromInt32(int32(minAvailable))) //nolint:gosec // G115: a test's handful of nodes.
	if err := h.client.Update(context.Background(), pdb); err != nil {
		h.t.Fatal(err)
	}
	if h.real {
		h.pdbs[name] = minAvailable
		h.disruption()
	}
}

// active is the condition of a settled group: ACTIVE, no update, every desired node
// Ready.
func active(ng *v1alpha1.NodeGroup) bool {
	return ng.Status.ObservedGeneration == ng.Generation && ng.Status.Phase == v1alpha1.PhaseActive && ng.Status.Update == nil && ng.Status.ReadySize == ng.Spec.Scaling.Desired() &&
		int32(len(ng.Status.Instances)) == ng.Spec.Scaling.Desired() //nolint:gosec // G115: a test's handful of nodes.
}

// instanceVersions counts the group's InService instances by launch template version.
func (h *harness) instanceVersions() map[string]int {
	out := map[string]int{}
	for _, i := range h.cloud.group().instances {
		if i.state == "InService" {
			out[i.version]++
		}
	}
	return out
}
