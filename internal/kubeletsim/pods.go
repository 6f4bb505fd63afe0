package kubeletsim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
)

// podIPs hands out the node's pod addresses from its pod CIDR.
type podIPs struct {
	mu     sync.Mutex
	prefix netip.Prefix
	byPod  map[types.UID]netip.Addr
	used   map[netip.Addr]bool
	next   netip.Addr
}

func newPodIPs(prefix netip.Prefix) *podIPs {
	first := prefix.Masked().Addr().Next()
	return &podIPs{prefix: prefix, byPod: map[types.UID]netip.Addr{}, used: map[netip.Addr]bool{}, next: first}
}

// get returns the pod's address, keeping the one it reports (after a restart of the
// node) or taking the next free one; false when the range is exhausted.
func (p *podIPs) get(uid types.UID, reported string) (netip.Addr, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a, ok := p.byPod[uid]; ok {
		return a, true
	}
	if a, err := netip.ParseAddr(reported); err == nil && p.prefix.Contains(a) && !p.used[a] {
		p.byPod[uid], p.used[a] = a, true
		return a, true
	}
	first := p.prefix.Masked().Addr().Next()
	for range 1 << (32 - p.prefix.Bits()) {
		a := p.next
		p.next = p.next.Next()
		if !p.prefix.Contains(p.next) {
			p.next = first
		}
		// Skip the network and broadcast addresses of the range.
		if !p.prefix.Contains(a.Next()) || p.used[a] {
			continue
		}
		p.byPod[uid], p.used[a] = a, true
		return a, true
	}
	return netip.Addr{}, false
}

func (p *podIPs) release(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a, ok := p.byPod[uid]; ok {
		delete(p.byPod, uid)
		delete(p.used, a)
	}
}

// runPods watches the pods bound to the node: a new pod is reported running and
// ready, and a pod being deleted (deleted or evicted) is confirmed deleted.
func (k *Kubelet) runPods(ctx context.Context) {
	selector := fields.OneTermEqualSelector("spec.nodeName", k.cfg.NodeName).String()
	factory := informers.NewSharedInformerFactoryWithOptions(k.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = selector }))
	informer := factory.Core().V1().Pods()
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer queue.ShutDown()
	ips := newPodIPs(k.cfg.PodCIDR)
	enqueue := func(obj any) {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			queue.Add(key)
		}
	}
	if _, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				ips.release(pod.UID)
			}
		},
	}); err != nil {
		k.fail("watching pods failed", err)
		return
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), informer.Informer().HasSynced) {
		return
	}
	go func() {
		<-ctx.Done()
		queue.ShutDown()
	}()
	lister := informer.Lister()
	for {
		key, shutdown := queue.Get()
		if shutdown {
			return
		}
		if err := k.syncPod(ctx, lister, ips, key); err != nil && ctx.Err() == nil {
			if !apierrors.IsConflict(err) {
				k.fail("syncing a pod failed, retrying", err, "pod", key)
			}
			queue.AddRateLimited(key)
		} else {
			queue.Forget(key)
		}
		queue.Done(key)
	}
}

func (k *Kubelet) syncPod(ctx context.Context, lister listerscorev1.PodLister, ips *podIPs, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	pod, err := lister.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	pods := k.client.CoreV1().Pods(ns)
	if pod.DeletionTimestamp != nil {
		// Its containers are gone at once: confirm the deletion, for this very pod only.
		err := pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: metav1.NewUIDPreconditions(string(pod.UID))})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		if err == nil {
			k.log.Info("confirmed pod deletion", "pod", key)
			k.update(func(s *Status) { s.PodsDeleted++ })
		}
		return err
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return nil
	}
	if running(pod) {
		if !pod.Spec.HostNetwork {
			ips.get(pod.UID, pod.Status.PodIP) // keep its address taken (after a restart)
		}
		return nil
	}
	podIP := k.cfg.InternalIP
	if !pod.Spec.HostNetwork {
		a, ok := ips.get(pod.UID, pod.Status.PodIP)
		if !ok {
			k.fail("no pod address left", errExhausted, "pod", key, "cidr", k.cfg.PodCIDR.String())
			return nil
		}
		podIP = a.String()
	}
	p := pod.DeepCopy()
	p.Status = runningStatus(pod, k.cfg.InternalIP, podIP, metav1.Now())
	if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		return err
	}
	k.update(func(s *Status) { s.PodsStarted++ })
	return nil
}

var errExhausted = errors.New("the pod CIDR is exhausted")

// running reports whether the pod's status already says it runs as this node runs it.
func running(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" {
		return false
	}
	want, _ := gatesReady(pod)
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && (c.Status == corev1.ConditionTrue) != want {
			return false
		}
	}
	ready := map[string]bool{}
	for _, c := range pod.Status.ContainerStatuses {
		ready[c.Name] = c.State.Running != nil && c.Ready
	}
	for _, c := range pod.Spec.Containers {
		if !ready[c.Name] {
			return false
		}
	}
	return len(pod.Status.InitContainerStatuses) == len(pod.Spec.InitContainers)
}

// setCondition sets a condition, keeping its transition time when its status holds.
func setCondition(st *corev1.PodStatus, c corev1.PodCondition) {
	for i := range st.Conditions {
		if st.Conditions[i].Type == c.Type {
			if st.Conditions[i].Status == c.Status {
				c.LastTransitionTime = st.Conditions[i].LastTransitionTime
			}
			st.Conditions[i] = c
			return
		}
	}
	st.Conditions = append(st.Conditions, c)
}

// containerID is a stable fake runtime ID for one container of one pod.
func containerID(uid types.UID, name string) string {
	sum := sha256.Sum256([]byte(string(uid) + "/" + name))
	return "containerd://" + hex.EncodeToString(sum[:])
}

func imageID(image string) string {
	sum := sha256.Sum256([]byte(image))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// gatesReady reports whether every readiness gate's condition is True, or names the
// first that is not.
func gatesReady(pod *corev1.Pod) (bool, corev1.PodConditionType) {
	for _, g := range pod.Spec.ReadinessGates {
		ok := false
		for _, c := range pod.Status.Conditions {
			ok = ok || (c.Type == g.ConditionType && c.Status == corev1.ConditionTrue)
		}
		if !ok {
			return false, g.ConditionType
		}
	}
	return true, ""
}

// runningStatus is the status of pod once its containers run: init containers
// completed (sidecars running), every container running and ready, the pod Ready
// unless a readiness gate says otherwise.
func runningStatus(pod *corev1.Pod, hostIP, podIP string, now metav1.Time) corev1.PodStatus {
	st := *pod.Status.DeepCopy()
	st.Phase = corev1.PodRunning
	st.Reason, st.Message = "", ""
	st.ObservedGeneration = pod.Generation
	st.HostIP, st.HostIPs = hostIP, []corev1.HostIP{{IP: hostIP}}
	st.PodIP, st.PodIPs = podIP, []corev1.PodIP{{IP: podIP}}
	if st.StartTime == nil {
		st.StartTime = &now
	}
	started := now
	status := func(c corev1.Container, prev []corev1.ContainerStatus) corev1.ContainerStatus {
		for _, p := range prev {
			if p.Name == c.Name && p.State.Running != nil {
				return p
			}
		}
		return corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: imageID(c.Image), ContainerID: containerID(pod.UID, c.Name),
			Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
		}
	}
	var inits []corev1.ContainerStatus
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			inits = append(inits, status(c, pod.Status.InitContainerStatuses))
			continue
		}
		inits = append(inits, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: imageID(c.Image), ContainerID: containerID(pod.UID, c.Name),
			Ready: true, Started: ptr.To(false),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 0, Reason: "Completed", StartedAt: started, FinishedAt: started, ContainerID: containerID(pod.UID, c.Name),
			}},
		})
	}
	st.InitContainerStatuses = inits
	var containers []corev1.ContainerStatus
	for _, c := range pod.Spec.Containers {
		containers = append(containers, status(c, pod.Status.ContainerStatuses))
	}
	st.ContainerStatuses = containers

	cond := func(t corev1.PodConditionType, s corev1.ConditionStatus, reason, msg string) {
		setCondition(&st, corev1.PodCondition{Type: t, Status: s, Reason: reason, Message: msg, LastTransitionTime: now, ObservedGeneration: pod.Generation})
	}
	cond(corev1.PodReadyToStartContainers, corev1.ConditionTrue, "", "")
	cond(corev1.PodInitialized, corev1.ConditionTrue, "", "")
	cond(corev1.ContainersReady, corev1.ConditionTrue, "", "")
	if ok, gate := gatesReady(pod); ok {
		cond(corev1.PodReady, corev1.ConditionTrue, "", "")
	} else {
		cond(corev1.PodReady, corev1.ConditionFalse, "ReadinessGatesNotReady",
			fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist or is not True", gate))
	}
	cond(corev1.PodScheduled, corev1.ConditionTrue, "", "")
	return st
}
