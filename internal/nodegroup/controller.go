// Package nodegroup is the NodeGroup controller: it keeps one EC2 launch template and
// one Auto Scaling group per NodeGroup and persists every step in the NodeGroup's
// status, so that a restarted controller resumes where the last one stopped. The
// reconciler is controller.go; it rolls the group onto a new launch template version
// as EKS managed node groups do (update.go), keeps its size (scale.go), replaces
// instances that do not join and reports launch failures with the EKS codes
// (replace.go), deletes it (delete.go) and drains nodes through the Eviction API
// (drain.go). It talks to the cloud only through aws-sdk-go-v2 (cloud.go) and imports
// no other part of nodejoin but api/ and its userdata subpackage.
package nodegroup

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/nodegroup/userdata"
)

// RenderUserData generates the user data of a node group's instances; image is the AMI
// their launch template boots ("" when not known).
type RenderUserData func(ctx context.Context, cluster userdata.Cluster, ng *v1alpha1.NodeGroup, image string) ([]byte, error)

// Options configure the controller.
type Options struct {
	// EC2 and AutoScaling are the cloud's APIs. Required.
	EC2         EC2
	AutoScaling AutoScaling
	// Cluster is what the user data points the nodes at.
	Cluster userdata.Cluster
	// Render generates user data; default Render (in the group's user data style).
	Render RenderUserData
	// Subnets the Auto Scaling groups span when a NodeGroup names none; without them,
	// AvailabilityZones.
	Subnets           []string
	AvailabilityZones []string
	// InstanceProfile and SecurityGroupIDs are the defaults of a NodeGroup's template.
	InstanceProfile  string
	SecurityGroupIDs []string
	// AMIs gives each family's image when a NodeGroup names none.
	AMIs map[v1alpha1.AMIFamily]string
	// ReleaseImage, when set, says which family an EKS-optimized image (a release) is
	// of. A group whose amiID is a release of its own family (as the EKS API's
	// releaseVersion sets it) boots with generated user data, as on the default image;
	// any other amiID is a custom AMI, which needs user data of its own.
	ReleaseImage func(ami string) (v1alpha1.AMIFamily, bool)
	// Workers is how many NodeGroups are reconciled at once; default 2.
	Workers int
	// Log, Registry (nil: metrics are not registered), Now (default time.Now).
	Log      *slog.Logger
	Registry prometheus.Registerer
	Now      func() time.Time
}

// Render generates the user data of a group's instances in its user data style: as EKS
// managed node groups give it (Managed) or as eksctl writes it for self-managed groups
// (Eksctl). When the group names no AMI of its own, image is the release AMI the
// controller chose for its family, which a managed group's nodes carry as the
// eks.amazonaws.com/nodegroup-image label, as EKS labels them (seed 001).
func Render(_ context.Context, c userdata.Cluster, ng *v1alpha1.NodeGroup, image string) ([]byte, error) {
	t, err := Template(ng)
	if err != nil {
		return nil, err
	}
	if ng.Spec.Template.AMIID == "" {
		t.ReleaseAMI = image
	}
	return userdata.Render(c, t)
}

// Template is the user-data template of a (defaulted) NodeGroup, in its user data style.
// An Eksctl-style group's nodes are labelled alpha.eksctl.io/nodegroup-name with the
// group's name unless its labels say otherwise, as eksctl labels them; that label maps
// them back to the group, as eks.amazonaws.com/nodegroup does for managed-style groups.
func Template(ng *v1alpha1.NodeGroup) (userdata.Template, error) {
	tp := ng.Spec.Template
	kubelet, err := tp.KubeletConfig()
	if err != nil {
		return userdata.Template{}, err
	}
	style, err := Style(tp.UserDataStyle)
	if err != nil {
		return userdata.Template{}, err
	}
	labels := tp.Labels
	if style == userdata.SelfManaged {
		if _, ok := labels[v1alpha1.LabelEksctlNodeGroupName]; !ok {
			labels = maps.Clone(labels)
			if labels == nil {
				labels = map[string]string{}
			}
			labels[v1alpha1.LabelEksctlNodeGroupName] = ng.Name
		}
	}
	t := userdata.Template{
		Family: tp.AMIFamily, Style: style, NodeGroupName: ng.Name,
		CapacityType: string(tp.CapacityType), Labels: labels, Taints: tp.Taints, Kubelet: kubelet, MaxPods: tp.MaxPods,
		PreBootstrapCommands: tp.PreBootstrapCommands, UserData: tp.UserData, AMIID: tp.AMIID,
	}
	if len(tp.InstanceTypes) > 0 {
		t.InstanceType = tp.InstanceTypes[0]
	}
	return t, nil
}

// Style maps a NodeGroup's user data style to the renderer's; empty is Managed.
func Style(s v1alpha1.UserDataStyle) (userdata.Style, error) {
	switch s {
	case "", v1alpha1.UserDataStyleManaged:
		return userdata.Managed, nil
	case v1alpha1.UserDataStyleEksctl:
		return userdata.SelfManaged, nil
	}
	return "", fmt.Errorf("spec.template.userDataStyle %q: want %s or %s", s, v1alpha1.UserDataStyleManaged, v1alpha1.UserDataStyleEksctl)
}

// Reconciler reconciles NodeGroups.
type Reconciler struct {
	// Client reads NodeGroups and Nodes (from the cache) and writes them.
	Client client.Client
	// Reader lists Pods and PodDisruptionBudgets, uncached.
	Reader   client.Reader
	Recorder events.EventRecorder
	opts     Options
	cloud    *cloud
	metrics  *Metrics
	members  members // instances seen in each group (worldnodes.go)
}

// New makes a Reconciler.
func New(c client.Client, reader client.Reader, rec events.EventRecorder, o Options) (*Reconciler, error) {
	if o.EC2 == nil || o.AutoScaling == nil {
		return nil, fmt.Errorf("the NodeGroup controller needs EC2 and Auto Scaling clients")
	}
	if len(o.Subnets) == 0 && len(o.AvailabilityZones) == 0 {
		return nil, fmt.Errorf("the NodeGroup controller needs default subnets or availability zones for Auto Scaling groups")
	}
	if o.Render == nil {
		o.Render = Render
	}
	if o.Workers <= 0 {
		o.Workers = 2
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Reconciler{Client: c, Reader: reader, Recorder: rec, opts: o, cloud: &cloud{ec2: o.EC2, asg: o.AutoScaling}, metrics: NewMetrics(o.Registry)}, nil
}

// SetupWithManager adds the controller to mgr; it runs on the leader only.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("nodegroup").
		For(&v1alpha1.NodeGroup{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(nodeGroupOfNode), builder.WithPredicates(nodeChanged())).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.opts.Workers}).
		Complete(r)
}

// nodeGroupOfNode maps a Node to its group by the label its user data gives it:
// eks.amazonaws.com/nodegroup (Managed style), else alpha.eksctl.io/nodegroup-name
// (Eksctl style).
func nodeGroupOfNode(_ context.Context, o client.Object) []reconcile.Request {
	l := o.GetLabels()
	g := l[v1alpha1.LabelNodeGroup]
	if g == "" {
		g = l[v1alpha1.LabelEksctlNodeGroupName]
	}
	if g != "" {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: g}}}
	}
	return nil
}

// nodeChanged passes Node events that can change a group's status: creation, deletion,
// readiness and schedulability.
func nodeChanged() predicate.Funcs {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*corev1.Node)
			n, ok2 := e.ObjectNew.(*corev1.Node)
			return !ok1 || !ok2 || nodeReady(o) != nodeReady(n) || o.Spec.Unschedulable != n.Spec.Unschedulable
		},
	}
}

// state is one reconcile's view of a group.
type state struct {
	ng   *v1alpha1.NodeGroup // the live object; its status is written
	spec *v1alpha1.NodeGroup // a defaulted copy, read for the spec
	now  time.Time
	// names of the cloud resources
	asgName, ltName string
	group           *group
	// nodes maps the group's instance IDs to Nodes; byInstance and byName hold every
	// Node, by the instance its providerID names and by name (worldnodes.go).
	nodes              map[string]*corev1.Node
	byInstance, byName map[string]*corev1.Node
	// issues are this reconcile's health issues.
	issues []v1alpha1.Issue
	// requeue is the soonest the group should be looked at again.
	requeue time.Duration
}

func (s *state) after(d time.Duration) {
	if d > 0 && (s.requeue == 0 || d < s.requeue) {
		s.requeue = d
	}
}

func (s *state) desired() int32 { return s.spec.Spec.Scaling.Desired() }

// Polling intervals.
const (
	pollBusy = 5 * time.Second
	// pollIdle is how often a settled group is read again: how soon a size changed on
	// the Auto Scaling group itself is put back (scale).
	pollIdle   = time.Minute
	backoffMin = 30 * time.Second
	backoffMax = 10 * time.Minute
)

// Reconcile brings one NodeGroup's cloud resources to its spec and reports status.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ng := &v1alpha1.NodeGroup{}
	if err := r.Client.Get(ctx, req.NamespacedName, ng); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	before := ng.DeepCopy()
	st := &state{ng: ng, spec: ng.DeepCopy(), now: r.opts.Now()}
	st.spec.Default()
	st.asgName, st.ltName = ResourceNames(ng)

	if !ng.DeletionTimestamp.IsZero() {
		done, err := r.delete(ctx, st)
		if err != nil || done {
			return reconcile.Result{}, err
		}
		return r.finish(ctx, st, before, nil)
	}
	if !controllerutil.ContainsFinalizer(ng, v1alpha1.NodeGroupFinalizer) {
		controllerutil.AddFinalizer(ng, v1alpha1.NodeGroupFinalizer)
		if err := r.Client.Update(ctx, ng); err != nil {
			return reconcile.Result{}, fmt.Errorf("adding the finalizer to NodeGroup %s: %w", ng.Name, err)
		}
		return reconcile.Result{Requeue: true}, nil //nolint:staticcheck // SA1019: an immediate, rate-limited requeue; RequeueAfter would need a guessed delay.
	}
	if errs := st.spec.Validate(); len(errs) > 0 {
		msg := errs.ToAggregate().Error()
		r.event(ng, corev1.EventTypeWarning, "InvalidSpec", "Validate", "%s", msg)
		setCondition(ng, "Ready", metav1.ConditionFalse, "InvalidSpec", msg)
		if ng.Status.AutoScalingGroupName == "" {
			ng.Status.Phase = v1alpha1.PhaseCreateFailed
		}
		return r.finish(ctx, st, before, nil)
	}
	err := r.reconcile(ctx, st)
	return r.finish(ctx, st, before, err)
}

// ResourceNames are the names of a group's Auto Scaling group and launch template, as
// EKS names them (eks-<group>-<uid>, eks-<uid>).
func ResourceNames(ng *v1alpha1.NodeGroup) (asg, launchTemplate string) {
	return "eks-" + ng.Name + "-" + string(ng.UID), "eks-" + string(ng.UID)
}

// finish writes the status when it changed and says when to come back.
func (r *Reconciler) finish(ctx context.Context, st *state, before *v1alpha1.NodeGroup, rerr error) (reconcile.Result, error) {
	ng := st.ng
	ng.Status.ObservedGeneration = ng.Generation
	if !equality.Semantic.DeepEqual(before.Status, ng.Status) {
		if err := r.Client.Status().Patch(ctx, ng, client.MergeFrom(before)); err != nil {
			if apierrors.IsNotFound(err) {
				return reconcile.Result{}, nil
			}
			if rerr == nil {
				rerr = fmt.Errorf("writing the status of NodeGroup %s: %w", ng.Name, err)
			}
		}
	}
	r.metrics.observe(ng)
	if rerr != nil {
		r.opts.Log.Warn("reconciling a node group failed", "nodegroup", ng.Name, "err", rerr)
		return reconcile.Result{}, rerr
	}
	if st.requeue == 0 {
		st.requeue = pollIdle
	}
	return reconcile.Result{RequeueAfter: st.requeue}, nil
}

func (r *Reconciler) reconcile(ctx context.Context, st *state) error {
	ng := st.ng
	if ng.Status.Phase == "" || ng.Status.Phase == v1alpha1.PhaseCreateFailed && ng.Status.AutoScalingGroupName == "" {
		ng.Status.Phase = v1alpha1.PhaseCreating
	}
	ng.Status.DesiredSize = st.desired()
	ng.Status.InstanceType = strings.Join(st.spec.Spec.Template.InstanceTypes, ",")
	if err := r.ensureTemplate(ctx, st); err != nil {
		return err
	}
	if ng.Status.LaunchTemplate == nil {
		// Nothing to launch from: the issues say why (user data that cannot be rendered).
		ng.Status.Health.Issues = st.issues
		if ng.Status.Phase == v1alpha1.PhaseCreating {
			ng.Status.Phase = v1alpha1.PhaseCreateFailed
		}
		setCondition(ng, "Ready", metav1.ConditionFalse, "NoLaunchTemplate", "no launch template: see status.health")
		return nil
	}
	if err := r.ensureGroup(ctx, st); err != nil {
		return err
	}
	if st.group == nil {
		st.after(pollBusy)
		return nil
	}
	if err := r.observe(ctx, st); err != nil {
		return err
	}
	if err := r.launchFailures(ctx, st); err != nil {
		return err
	}
	if err := r.rollOrScale(ctx, st); err != nil {
		return err
	}
	if err := r.joinTimeouts(ctx, st); err != nil {
		return err
	}
	r.summarize(st)
	return nil
}

// releaseImage says which family's EKS-optimized release ami is (Options.ReleaseImage).
func (r *Reconciler) releaseImage(ami string) (v1alpha1.AMIFamily, bool) {
	if ami == "" || r.opts.ReleaseImage == nil {
		return "", false
	}
	return r.opts.ReleaseImage(ami)
}

// ensureTemplate renders the launch template data and makes sure the launch template
// has it as its latest version.
func (r *Reconciler) ensureTemplate(ctx context.Context, st *state) error {
	ng, t := st.ng, st.spec.Spec.Template
	image := t.AMIID
	if image == "" {
		image = r.opts.AMIs[t.AMIFamily]
	}
	spec := st.spec
	if fam, ok := r.releaseImage(t.AMIID); ok && fam == t.AMIFamily {
		spec = spec.DeepCopy()
		spec.Spec.Template.AMIID = ""
	}
	ut, spec, ok, err := r.userTemplate(ctx, st, spec)
	if !ok || err != nil {
		return err
	}
	if ut != nil && ut.ImageID != "" {
		image = ut.ImageID
	}
	ud, err := r.opts.Render(ctx, r.opts.Cluster, spec, image)
	if err != nil {
		// The spec must change: report it and wait.
		st.issues = append(st.issues, v1alpha1.Issue{Code: v1alpha1.IssueEc2LaunchTemplateInvalidConfig, Message: "rendering user data: " + err.Error()})
		r.event(ng, corev1.EventTypeWarning, string(v1alpha1.IssueEc2LaunchTemplateInvalidConfig), "RenderUserData", "rendering user data: %v", err)
		return nil
	}
	clusterName := r.opts.Cluster.Name
	d := &templateData{
		ImageID: image, UserData: ud, InstanceProfile: firstNonEmpty(t.InstanceProfile, r.opts.InstanceProfile),
		SecurityGroupIDs: t.SecurityGroupIDs,
		Tags: map[string]string{"eks:cluster-name": clusterName, "eks:nodegroup-name": ng.Name,
			"kubernetes.io/cluster/" + clusterName: "owned"},
	}
	if len(d.SecurityGroupIDs) == 0 {
		d.SecurityGroupIDs = r.opts.SecurityGroupIDs
	}
	t = st.spec.Spec.Template // with a launch template's instance type
	if len(t.InstanceTypes) == 1 && t.CapacityType != v1alpha1.CapacitySpot {
		d.InstanceType = t.InstanceTypes[0]
	}
	withUserTemplate(d, ut)
	hash := d.hash()
	if lt := ng.Status.LaunchTemplate; lt != nil && lt.Hash == hash {
		return nil
	}
	id, version, created, err := r.cloud.ensureTemplate(ctx, st.ltName, d, map[string]string{"eks:cluster-name": clusterName, "eks:nodegroup-name": ng.Name})
	if err != nil {
		st.issues = append(st.issues, v1alpha1.Issue{Code: cloudIssue(err, v1alpha1.IssueEc2LaunchTemplateInvalidConfig), Message: err.Error()})
		return err
	}
	ng.Status.LaunchTemplate = &v1alpha1.LaunchTemplateStatus{Name: st.ltName, ID: id, Version: version, Hash: hash}
	ng.Status.SourceLaunchTemplate = nil
	if ut != nil {
		ng.Status.SourceLaunchTemplate = &v1alpha1.SourceLaunchTemplateStatus{Name: ut.Name, ID: ut.ID, Version: ut.Version}
	}
	if created {
		r.event(ng, corev1.EventTypeNormal, "LaunchTemplateVersionCreated", "CreateLaunchTemplateVersion", "launch template %s (%s) version %s", st.ltName, id, version)
	}
	return nil
}

// groupSpec is the Auto Scaling group the steady state wants.
func (r *Reconciler) groupSpec(st *state) *groupSpec {
	t := st.spec.Spec.Template
	s := &groupSpec{
		Name: st.asgName, LaunchTemplateID: st.ng.Status.LaunchTemplate.ID, LaunchTemplateVersion: st.ng.Status.LaunchTemplate.Version,
		Min: st.spec.Spec.Scaling.MinSize, Max: st.spec.Spec.Scaling.MaxSize, Desired: st.desired(),
		Subnets: st.spec.Spec.Subnets, AvailabilityZones: r.opts.AvailabilityZones, Spot: t.CapacityType == v1alpha1.CapacitySpot,
	}
	if len(s.Subnets) == 0 {
		s.Subnets = r.opts.Subnets
	}
	if len(t.InstanceTypes) > 1 || s.Spot {
		s.InstanceTypes = t.InstanceTypes
	}
	return s
}

// ensureGroup reads the Auto Scaling group, creating it when it does not exist.
func (r *Reconciler) ensureGroup(ctx context.Context, st *state) error {
	ng := st.ng
	g, err := r.cloud.describeGroup(ctx, st.asgName)
	if err != nil {
		return err
	}
	if g != nil {
		st.group = g
		ng.Status.AutoScalingGroupName = st.asgName
		return nil
	}
	if ng.Status.LaunchTemplate == nil {
		return nil // nothing to launch from yet; issues say why
	}
	if ng.Status.AutoScalingGroupName != "" && ng.Status.Phase != v1alpha1.PhaseCreating {
		// It existed and is gone: report it, and make it again.
		st.issues = append(st.issues, v1alpha1.Issue{Code: v1alpha1.IssueAutoScalingGroupNotFound,
			Message: "Auto Scaling group " + st.asgName + " was not found; creating it again", ResourceIDs: []string{st.asgName}})
	}
	s := r.groupSpec(st)
	s.Tags = map[string]string{
		"eks:cluster-name": r.opts.Cluster.Name, "eks:nodegroup-name": ng.Name,
		"kubernetes.io/cluster/" + r.opts.Cluster.Name:     "owned",
		"k8s.io/cluster-autoscaler/enabled":                "true",
		"k8s.io/cluster-autoscaler/" + r.opts.Cluster.Name: "owned",
	}
	if err := r.cloud.createGroup(ctx, s); err != nil {
		st.issues = append(st.issues, v1alpha1.Issue{Code: cloudIssue(err, v1alpha1.IssueAutoScalingGroupInvalidConfig), Message: err.Error(), ResourceIDs: []string{st.asgName}})
		return err
	}
	ng.Status.AutoScalingGroupName = st.asgName
	r.event(ng, corev1.EventTypeNormal, "AutoScalingGroupCreated", "CreateAutoScalingGroup", "Auto Scaling group %s: min %d, max %d, desired %d, launch template %s version %s",
		s.Name, s.Min, s.Max, s.Desired, s.LaunchTemplateID, s.LaunchTemplateVersion)
	return nil
}

// observe matches the group's instances with Nodes and records them in the status.
func (r *Reconciler) observe(ctx context.Context, st *state) error {
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes); err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	byInstance, byName := map[string]*corev1.Node{}, map[string]*corev1.Node{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		byName[n.Name] = n
		if id := instanceID(n.Spec.ProviderID); id != "" {
			byInstance[id] = n
		}
	}
	st.byInstance, st.byName = byInstance, byName
	r.members.record(st.asgName, st.group.Instances, func(id string) bool { return inFlight(st.ng, id) })
	st.nodes = map[string]*corev1.Node{}
	prev := map[string]v1alpha1.InstanceStatus{}
	for _, in := range st.ng.Status.Instances {
		prev[in.InstanceID] = in
	}
	var out []v1alpha1.InstanceStatus
	for _, gi := range st.group.Instances {
		is := v1alpha1.InstanceStatus{InstanceID: gi.ID, AvailabilityZone: gi.AZ, LaunchTemplateVersion: gi.Version,
			LifecycleState: gi.LifecycleState, FirstSeen: metav1.NewTime(st.now)}
		if p, ok := prev[gi.ID]; ok {
			is.FirstSeen, is.JoinedAt = p.FirstSeen, p.JoinedAt
		}
		if n := byInstance[gi.ID]; n != nil {
			st.nodes[gi.ID] = n
			is.NodeName, is.Ready = n.Name, nodeReady(n)
			if is.Ready && is.JoinedAt == nil {
				is.JoinedAt = ptrTime(st.now)
			}
		}
		out = append(out, is)
	}
	st.ng.Status.Instances = out
	return nil
}

// instanceID is the instance of a providerID aws:///<zone>/<instance>.
func instanceID(providerID string) string {
	if !strings.HasPrefix(providerID, "aws://") {
		return ""
	}
	id := providerID[strings.LastIndex(providerID, "/")+1:]
	if !strings.HasPrefix(id, "i-") {
		return ""
	}
	return id
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ready reports whether the instance's node is Ready.
func (s *state) ready(id string) bool {
	n := s.nodes[id]
	return n != nil && nodeReady(n)
}

// live returns the group's live instances.
func (s *state) live() []groupInstance {
	var out []groupInstance
	for _, i := range s.group.Instances {
		if i.live() {
			out = append(out, i)
		}
	}
	return out
}

// summarize writes the counts, the health, the phase and the conditions.
//
//nolint:gocyclo // a flat sequence of counts and conditions, each set once.
func (r *Reconciler) summarize(st *state) {
	ng := st.ng
	var ready, updated int32
	target := ng.Status.LaunchTemplate.Version
	for _, i := range st.live() {
		if st.ready(i.ID) {
			ready++
		}
		if i.Version == target {
			updated++
		}
	}
	ng.Status.ReadySize, ng.Status.UpdatedSize = ready, updated
	// A failed update's PodEvictionFailure and the last NodeCreationFailure while
	// replacements back off stay until they are resolved.
	for _, old := range ng.Status.Health.Issues {
		keep := old.Code == v1alpha1.IssuePodEvictionFailure && ng.Status.Update != nil && ng.Status.Update.Phase == v1alpha1.UpdatePhaseFailed ||
			old.Code == v1alpha1.IssueNodeCreationFailure && ng.Status.Replacement != nil
		if keep && !slices.ContainsFunc(st.issues, func(i v1alpha1.Issue) bool { return i.Code == old.Code }) {
			st.issues = append(st.issues, old)
		}
	}
	slices.SortStableFunc(st.issues, func(a, b v1alpha1.Issue) int { return strings.Compare(string(a.Code), string(b.Code)) })
	ng.Status.Health.Issues = st.issues
	allReady := ready >= st.desired()
	u := ng.Status.Update
	switch {
	case u != nil && u.Phase != v1alpha1.UpdatePhaseFailed:
		ng.Status.Phase = v1alpha1.PhaseUpdating
	case ng.Status.Phase == v1alpha1.PhaseCreating || ng.Status.Phase == v1alpha1.PhaseCreateFailed:
		switch {
		case allReady:
			ng.Status.Phase = v1alpha1.PhaseActive
		case hasIssue(st.issues, v1alpha1.IssueNodeCreationFailure, v1alpha1.IssueAsgInstanceLaunchFailures, v1alpha1.IssueInstanceLimitExceeded):
			ng.Status.Phase = v1alpha1.PhaseCreateFailed
		}
	case len(st.issues) > 0:
		ng.Status.Phase = v1alpha1.PhaseDegraded
	default:
		ng.Status.Phase = v1alpha1.PhaseActive
	}
	if allReady {
		setCondition(ng, "Ready", metav1.ConditionTrue, "NodesReady", fmt.Sprintf("%d of %d nodes Ready", ready, st.desired()))
	} else {
		setCondition(ng, "Ready", metav1.ConditionFalse, "NodesNotReady", fmt.Sprintf("%d of %d nodes Ready", ready, st.desired()))
		st.after(pollBusy)
	}
	if u != nil {
		setCondition(ng, "Updating", metav1.ConditionTrue, string(u.Phase), u.Message)
	} else {
		setCondition(ng, "Updating", metav1.ConditionFalse, "UpToDate", fmt.Sprintf("every instance is on launch template version %s", target))
	}
	if len(st.issues) > 0 {
		codes := make([]string, len(st.issues))
		for i, is := range st.issues {
			codes[i] = string(is.Code)
		}
		setCondition(ng, "Degraded", metav1.ConditionTrue, string(st.issues[0].Code), strings.Join(codes, ", "))
	} else {
		setCondition(ng, "Degraded", metav1.ConditionFalse, "NoIssues", "no health issues")
	}
}

func hasIssue(issues []v1alpha1.Issue, codes ...v1alpha1.IssueCode) bool {
	return slices.ContainsFunc(issues, func(i v1alpha1.Issue) bool { return slices.Contains(codes, i.Code) })
}

func setCondition(ng *v1alpha1.NodeGroup, typ string, status metav1.ConditionStatus, reason, msg string) {
	if reason == "" {
		reason = "Unknown"
	}
	apimeta.SetStatusCondition(&ng.Status.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: ng.Generation})
}

// event records an Event about the group and logs it.
func (r *Reconciler) event(ng *v1alpha1.NodeGroup, typ, reason, action, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if typ == corev1.EventTypeWarning {
		r.opts.Log.Warn("node group event", "nodegroup", ng.Name, "reason", reason, "message", msg)
	} else {
		r.opts.Log.Info("node group event", "nodegroup", ng.Name, "reason", reason, "message", msg)
	}
	if r.Recorder != nil {
		r.Recorder.Eventf(ng, nil, typ, reason, action, "%s", msg)
	}
}

// cloudIssue maps an AWS error to the issue code EKS would report, def when none fits.
func cloudIssue(err error, def v1alpha1.IssueCode) v1alpha1.IssueCode {
	switch code := apiCode(err); {
	case code == "AccessDenied" || code == "UnauthorizedOperation" || code == "AccessDeniedException":
		return v1alpha1.IssueAccessDenied
	case code == "Throttling" || code == "RequestLimitExceeded":
		return v1alpha1.IssueAutoScalingGroupRateLimitExceed
	case strings.Contains(code, "InvalidAMIID"):
		return v1alpha1.IssueAmiIDNotFound
	case strings.Contains(code, "InvalidSubnet"):
		return v1alpha1.IssueEc2SubnetNotFound
	}
	return def
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
