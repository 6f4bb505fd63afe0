package kubeletsim

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodejoin/nodejoin/internal/addons"
)

const (
	// leaseNamespace holds the nodes' heartbeat Leases.
	leaseNamespace = corev1.NamespaceNodeLease
	// registerMaxDelay bounds the registration retry delay (100ms doubling), as the
	// kubelet bounds it.
	registerMaxDelay = 7 * time.Second
	// leaseRetryFirst is the first delay after a failed Lease renewal; it doubles up to
	// the renew interval.
	leaseRetryFirst        = 200 * time.Millisecond
	annotationAttachDetach = "volumes.kubernetes.io/controller-managed-attach-detach"
)

// addresses are the node's status.addresses: the internal IP, then the private DNS
// name as InternalDNS and Hostname.
func (k *Kubelet) addresses() []corev1.NodeAddress {
	return []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: k.cfg.InternalIP},
		{Type: corev1.NodeInternalDNS, Address: k.cfg.InternalDNS},
		{Type: corev1.NodeHostName, Address: k.cfg.InternalDNS},
	}
}

// labels are the kubelet's own labels, then Config.Labels, which win as --node-labels do.
func (k *Kubelet) labels() map[string]string {
	l := map[string]string{
		corev1.LabelHostname:           k.cfg.InternalDNS,
		corev1.LabelOSStable:           "linux",
		corev1.LabelArchStable:         "amd64",
		"beta.kubernetes.io/os":        "linux",
		"beta.kubernetes.io/arch":      "amd64",
		corev1.LabelInstanceTypeStable: k.cfg.InstanceType,
		corev1.LabelTopologyZone:       k.cfg.Zone,
		corev1.LabelTopologyRegion:     k.cfg.Region,
		// Node add-ons (kube-proxy) keep off simulated nodes: there is nothing to program.
		addons.SimulatedNodeLabel: "true",
	}
	for _, key := range []string{corev1.LabelInstanceTypeStable, corev1.LabelTopologyZone, corev1.LabelTopologyRegion} {
		if l[key] == "" {
			delete(l, key)
		}
	}
	maps.Copy(l, k.cfg.Labels)
	return l
}

// idOf derives a stable hexadecimal identifier from the node name.
func (k *Kubelet) idOf(kind string) string {
	sum := sha256.Sum256([]byte(kind + "/" + k.cfg.NodeName))
	return hex.EncodeToString(sum[:16])
}

// conditions are the node's conditions at now; a condition whose status is unchanged
// from prev keeps its transition time.
func conditions(now metav1.Time, prev []corev1.NodeCondition) []corev1.NodeCondition {
	out := []corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure"},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available"},
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status"},
	}
	for i := range out {
		out[i].LastHeartbeatTime, out[i].LastTransitionTime = now, now
		for _, p := range prev {
			if p.Type == out[i].Type && p.Status == out[i].Status && !p.LastTransitionTime.IsZero() {
				out[i].LastTransitionTime = p.LastTransitionTime
			}
		}
	}
	return out
}

// nodeStatus is the status the node reports at now, given the status it replaces.
func (k *Kubelet) nodeStatus(now metav1.Time, prev *corev1.NodeStatus) corev1.NodeStatus {
	var prevConds []corev1.NodeCondition
	st := corev1.NodeStatus{}
	if prev != nil {
		st = *prev.DeepCopy()
		prevConds = prev.Conditions
	}
	st.Capacity = k.cfg.Capacity.DeepCopy()
	st.Allocatable = k.cfg.Allocatable.DeepCopy()
	st.Conditions = conditions(now, prevConds)
	st.Addresses = k.addresses()
	st.DaemonEndpoints = corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}}
	st.NodeInfo = corev1.NodeSystemInfo{
		MachineID:               k.idOf("machine-id"),
		SystemUUID:              "ec2" + uuid(k.idOf("system-uuid"))[3:], // as EC2's system UUIDs begin
		BootID:                  k.bootID,
		KernelVersion:           "6.1.0-kubeletsim",
		OSImage:                 "Amazon Linux 2023 (kubeletsim)",
		ContainerRuntimeVersion: containerRuntimeVersion,
		KubeletVersion:          k.cfg.Version,
		OperatingSystem:         "linux",
		Architecture:            "amd64",
	}
	return st
}

// statusChanged reports whether the node's reported status differs from what it
// would report, heartbeat times aside.
func (k *Kubelet) statusChanged(cur *corev1.NodeStatus) bool {
	want := k.nodeStatus(metav1.Time{}, nil)
	if !apiequality.Semantic.DeepEqual(cur.Addresses, want.Addresses) ||
		!apiequality.Semantic.DeepEqual(cur.Capacity, want.Capacity) ||
		!apiequality.Semantic.DeepEqual(cur.Allocatable, want.Allocatable) ||
		cur.NodeInfo != want.NodeInfo {
		return true
	}
	for _, w := range want.Conditions {
		found := false
		for _, c := range cur.Conditions {
			if c.Type == w.Type {
				found = c.Status == w.Status && c.Reason == w.Reason
			}
		}
		if !found {
			return true
		}
	}
	return false
}

// register creates the Node, or takes over an existing one, retrying (100ms doubling
// up to 7s) until it succeeds or ctx ends.
func (k *Kubelet) register(ctx context.Context) (*corev1.Node, error) {
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, registerMaxDelay) {
		node, err := k.tryRegister(ctx)
		if err == nil {
			k.log.Info("registered the node")
			k.update(func(s *Status) { s.Authenticated, s.Registered, s.Ready = true, true, true })
			return node, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		k.noteAuth(err)
		if apierrors.IsForbidden(err) {
			k.fail("registering the node was forbidden, retrying", err)
		} else {
			k.fail("registering the node failed, retrying", err)
		}
		if !sleep(ctx, delay) {
			return nil, ctx.Err()
		}
	}
}

// noteAuth records whether an error says the API server refused the credentials.
func (k *Kubelet) noteAuth(err error) {
	if apierrors.IsUnauthorized(err) {
		k.update(func(s *Status) { s.Authenticated = false })
	}
}

// taintUninitialized is the taint of a Node whose cloud controller has not checked it.
const taintUninitialized = "node.cloudprovider.kubernetes.io/uninitialized"

// registerTaints are the taints a new Node starts with.
func (k *Kubelet) registerTaints() []corev1.Taint {
	taints := append([]corev1.Taint(nil), k.cfg.RegisterWithTaints...)
	if k.cfg.ExternalCloudProvider {
		taints = append(taints, corev1.Taint{Key: taintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule})
	}
	return taints
}

func (k *Kubelet) tryRegister(ctx context.Context) (*corev1.Node, error) {
	nodes := k.client.CoreV1().Nodes()
	now := metav1.Now()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        k.cfg.NodeName,
			Labels:      k.labels(),
			Annotations: map[string]string{annotationAttachDetach: "true"},
		},
		Spec:   corev1.NodeSpec{ProviderID: k.cfg.ProviderID, Taints: k.registerTaints()},
		Status: k.nodeStatus(now, nil),
	}
	created, err := nodes.Create(ctx, node, metav1.CreateOptions{})
	if err == nil || !apierrors.IsAlreadyExists(err) {
		return created, err
	}
	// The Node exists (a restarted or replaced instance with the same name): take it
	// over, setting the kubelet's labels and a fresh status.
	existing, err := nodes.Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	want := existing.DeepCopy()
	if want.Labels == nil {
		want.Labels = map[string]string{}
	}
	maps.Copy(want.Labels, k.labels())
	if want.Annotations == nil {
		want.Annotations = map[string]string{}
	}
	want.Annotations[annotationAttachDetach] = "true"
	if want.Spec.ProviderID == "" {
		want.Spec.ProviderID = k.cfg.ProviderID
	}
	if !apiequality.Semantic.DeepEqual(want.ObjectMeta, existing.ObjectMeta) || want.Spec.ProviderID != existing.Spec.ProviderID {
		if existing, err = nodes.Update(ctx, want, metav1.UpdateOptions{}); err != nil {
			return nil, err
		}
	}
	existing.Status = k.nodeStatus(now, &existing.Status)
	updated, err := nodes.UpdateStatus(ctx, existing, metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	k.log.Info("took over an existing Node", "uid", string(updated.UID))
	return updated, nil
}

// runStatus checks the node status every 10 seconds (StatusInterval if shorter) and
// posts it when it changed, or when StatusInterval has passed since the last post.
func (k *Kubelet) runStatus(ctx context.Context) {
	last := time.Now()
	interval := min(statusCheckInterval, k.cfg.StatusInterval)
	for sleep(ctx, interval) {
		posted, err := k.postStatus(ctx, time.Since(last) >= k.cfg.StatusInterval)
		if err != nil {
			if ctx.Err() == nil {
				k.noteAuth(err)
				k.fail("posting node status failed", err)
			}
			continue
		}
		if posted {
			last = time.Now()
			k.update(func(s *Status) { s.Ready, s.Authenticated = true, true })
		}
	}
}

// postStatus posts the node status if it changed or force is set. Like the kubelet it
// reads the Node from the API server's cache first, and reads it afresh after a
// conflict, trying up to five times.
func (k *Kubelet) postStatus(ctx context.Context, force bool) (bool, error) {
	nodes := k.client.CoreV1().Nodes()
	var err error
	for i := range 5 {
		opts := metav1.GetOptions{}
		if i == 0 {
			opts.ResourceVersion = "0"
		}
		var node *corev1.Node
		if node, err = nodes.Get(ctx, k.cfg.NodeName, opts); err != nil {
			return false, err
		}
		if !force && !k.statusChanged(&node.Status) {
			return false, nil
		}
		node.Status = k.nodeStatus(metav1.Now(), &node.Status)
		if _, err = nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
			return err == nil, err
		}
	}
	return false, err
}

// runLease keeps the node's Lease in kube-node-lease, owned by its Node, renewing it
// every quarter of its duration; a failed renewal is retried sooner.
func (k *Kubelet) runLease(ctx context.Context, node *corev1.Node) {
	interval := k.cfg.LeaseDuration / 4
	retry := leaseRetryFirst
	var lease *coordinationv1.Lease
	for {
		var err error
		lease, err = k.renewLease(ctx, node, lease)
		wait := interval
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			k.noteAuth(err)
			k.fail("renewing the node lease failed", err)
			wait, retry = min(retry, interval), min(2*retry, interval)
		} else {
			retry = leaseRetryFirst
			now := time.Now()
			k.update(func(s *Status) { s.LeaseRenewals++; s.LastLeaseRenewal = now })
		}
		if !sleep(ctx, wait) {
			return
		}
	}
}

// renewLease writes the Lease with a new renew time, creating it when it is missing;
// it returns the Lease as stored, or nil after a failure so that the next attempt
// reads it afresh.
func (k *Kubelet) renewLease(ctx context.Context, node *corev1.Node, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	leases := k.client.CoordinationV1().Leases(leaseNamespace)
	if lease == nil {
		cur, err := leases.Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: k.cfg.NodeName, Namespace: leaseNamespace}}
			k.leaseSpec(l, node)
			created, err := leases.Create(ctx, l, metav1.CreateOptions{})
			if err != nil {
				return nil, err
			}
			return created, nil
		case err != nil:
			return nil, err
		}
		lease = cur
	}
	l := lease.DeepCopy()
	k.leaseSpec(l, node)
	updated, err := leases.Update(ctx, l, metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	return updated, nil
}

func (k *Kubelet) leaseSpec(l *coordinationv1.Lease, node *corev1.Node) {
	l.Spec.HolderIdentity = ptr.To(k.cfg.NodeName)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(k.cfg.LeaseDuration.Seconds())) // at most an hour
	l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	if len(l.OwnerReferences) == 0 {
		l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
	}
}

// uuid formats 32 hexadecimal digits as a UUID.
func uuid(h string) string {
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// newBootID is a fresh boot ID for each start, as a reboot gives.
func newBootID() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return uuid(hex.EncodeToString(b)), nil
}
