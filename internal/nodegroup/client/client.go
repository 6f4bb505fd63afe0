// Package client does the work of the nodegroup commands (`nodejoin create|get|
// describe|scale|upgrade|delete nodegroup`) on one cluster's API: it reads and writes
// NodeGroup objects and follows their status while the node group controller does the
// cloud work, and renders groups as tables, manifests and progress lines. It also
// renders a NodeGroup's user data offline (`nodejoin userdata render`). It never talks
// to the cloud itself.
package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

// Client works on the NodeGroup objects of one cluster.
type Client struct {
	c client.Client
	// Cluster names the cluster in messages.
	Cluster string
	// Poll is how often Wait reads the group; default one second.
	Poll time.Duration
	cfg  *rest.Config
}

// New returns a Client of the cluster whose admin kubeconfig is at path.
func New(kubeconfig, cluster string) (*Client, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig of cluster %s (%s): %w", cluster, kubeconfig, err)
	}
	return NewForConfig(cfg, cluster)
}

// NewForConfig returns a Client of the cluster cfg reaches.
func NewForConfig(cfg *rest.Config, cluster string) (*Client, error) {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, fmt.Errorf("connecting to cluster %s: %w", cluster, err)
	}
	return &Client{c: c, Cluster: cluster, Poll: time.Second, cfg: cfg}, nil
}

// NewWithClient returns a Client over c, for tests.
func NewWithClient(c client.Client, cluster string) *Client {
	return &Client{c: c, Cluster: cluster, Poll: time.Second}
}

// ServerVersion is the cluster's Kubernetes version, major.minor, or "" when it cannot
// be read.
func (c *Client) ServerVersion() string {
	if c.cfg == nil {
		return ""
	}
	dc, err := discovery.NewDiscoveryClientForConfig(c.cfg)
	if err != nil {
		return ""
	}
	v, err := dc.ServerVersion()
	if err != nil {
		return ""
	}
	return v.Major + "." + v.Minor
}

// apiError turns an API error into one that says what to do.
func (c *Client) apiError(doing string, err error) error {
	if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) && strings.Contains(err.Error(), "the server could not find the requested resource") {
		return fmt.Errorf("%s: cluster %s does not serve NodeGroups (nodejoin.io/v1alpha1): its nodejoin-controller runs without the node group controller; start the cluster with this nodejoin's `nodejoin up`: %w", doing, c.Cluster, err)
	}
	return fmt.Errorf("%s: %w", doing, err)
}

func (c *Client) notFound(name string) error {
	return fmt.Errorf("node group %s not found in cluster %s; list them with `nodejoin get nodegroup --cluster %s`", name, c.Cluster, c.Cluster)
}

// Create creates each group. A group that exists already is an error naming it, and
// nothing after it is created; the groups created before are returned.
func (c *Client) Create(ctx context.Context, ngs []v1alpha1.NodeGroup) ([]string, error) {
	var created []string
	for i := range ngs {
		ng := ngs[i].DeepCopy()
		ng.ResourceVersion = ""
		ng.Status = v1alpha1.NodeGroupStatus{}
		if err := c.c.Create(ctx, ng); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return created, fmt.Errorf("node group %s exists already in cluster %s: change it with `nodejoin scale nodegroup` or `nodejoin upgrade nodegroup`, or delete it first", ng.Name, c.Cluster)
			}
			if apierrors.IsInvalid(err) {
				return created, fmt.Errorf("node group %s is invalid: %w", ng.Name, err)
			}
			return created, c.apiError("creating node group "+ng.Name, err)
		}
		created = append(created, ng.Name)
	}
	return created, nil
}

// List returns the cluster's groups by name.
func (c *Client) List(ctx context.Context) ([]v1alpha1.NodeGroup, error) {
	var l v1alpha1.NodeGroupList
	if err := c.c.List(ctx, &l); err != nil {
		return nil, c.apiError("listing node groups", err)
	}
	slices.SortFunc(l.Items, func(a, b v1alpha1.NodeGroup) int { return strings.Compare(a.Name, b.Name) })
	return l.Items, nil
}

// Get returns the group name.
func (c *Client) Get(ctx context.Context, name string) (*v1alpha1.NodeGroup, error) {
	var ng v1alpha1.NodeGroup
	if err := c.c.Get(ctx, types.NamespacedName{Name: name}, &ng); err != nil {
		if apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
			if _, lerr := c.List(ctx); lerr != nil {
				return nil, lerr // the API has no NodeGroups at all
			}
			return nil, c.notFound(name)
		}
		return nil, c.apiError("reading node group "+name, err)
	}
	return &ng, nil
}

// update reads the group, applies change and writes it, again on a conflict.
func (c *Client) update(ctx context.Context, name string, change func(ng *v1alpha1.NodeGroup) error) (*v1alpha1.NodeGroup, error) {
	var out *v1alpha1.NodeGroup
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ng, err := c.Get(ctx, name)
		if err != nil {
			return err
		}
		if err := change(ng); err != nil {
			return err
		}
		if err := c.c.Update(ctx, ng); err != nil {
			return err
		}
		out = ng
		return nil
	})
	if err != nil && (apierrors.IsConflict(err) || apierrors.IsInvalid(err)) {
		return nil, fmt.Errorf("updating node group %s: %w", name, err)
	}
	return out, err
}

// Sizes is a scale request; nil fields stay as they are.
type Sizes struct {
	Desired, Min, Max *int32
}

// ScaleResult is what Scale changed.
type ScaleResult struct {
	Before, After v1alpha1.ScalingConfig
	// Generation is the spec generation that carries the change.
	Generation int64
}

// Scale changes the group's sizes. A desired size outside the (new) bounds is an
// error that names the flag to pass, as eksctl's is.
func (c *Client) Scale(ctx context.Context, name string, s Sizes) (*ScaleResult, error) {
	var res ScaleResult
	ng, err := c.update(ctx, name, func(ng *v1alpha1.NodeGroup) error {
		if ng.DeletionTimestamp != nil {
			return fmt.Errorf("node group %s is being deleted", name)
		}
		res.Before = *ng.Spec.Scaling.DeepCopy()
		after, err := scaled(ng.Spec.Scaling, s)
		if err != nil {
			return fmt.Errorf("node group %s: %w", name, err)
		}
		ng.Spec.Scaling = after
		res.After = *after.DeepCopy()
		return nil
	})
	if err != nil {
		return nil, err
	}
	res.Generation = ng.Generation
	return &res, nil
}

// scaled applies s to cur and checks the result.
func scaled(cur v1alpha1.ScalingConfig, s Sizes) (v1alpha1.ScalingConfig, error) {
	out := *cur.DeepCopy()
	for _, v := range []struct {
		flag string
		p    *int32
	}{{"--nodes", s.Desired}, {"--nodes-min", s.Min}, {"--nodes-max", s.Max}} {
		if v.p != nil && *v.p < 0 {
			return out, fmt.Errorf("%s %d is negative", v.flag, *v.p)
		}
	}
	if s.Min != nil {
		out.MinSize = *s.Min
	}
	if s.Max != nil {
		out.MaxSize = *s.Max
	}
	if s.Desired != nil {
		out.DesiredSize = ptr(*s.Desired)
	}
	desired := out.MinSize
	if out.DesiredSize != nil {
		desired = *out.DesiredSize
	}
	switch {
	case out.MaxSize < 1:
		return out, fmt.Errorf("--nodes-max %d: a group's maximum is at least 1", out.MaxSize)
	case out.MinSize > out.MaxSize:
		return out, fmt.Errorf("the minimum %d exceeds the maximum %d; pass --nodes-min or --nodes-max to make them fit", out.MinSize, out.MaxSize)
	case desired > out.MaxSize:
		return out, fmt.Errorf("%d nodes exceed the group's maximum %d; pass --nodes-max %d too", desired, out.MaxSize, desired)
	case desired < out.MinSize:
		return out, fmt.Errorf("%d nodes are below the group's minimum %d; pass --nodes-min %d too", desired, out.MinSize, desired)
	}
	return out, nil
}

// UpgradeResult is what Upgrade changed.
type UpgradeResult struct {
	// FromVersion is the launch template version before.
	FromVersion string
	// TemplateChanged says whether the template changed (which starts a rolling
	// update); otherwise the group was up to date already.
	TemplateChanged bool
	// Generation is the spec generation that carries the change.
	Generation int64
	// Outdated counts the group's instances not on the current launch template
	// version when nothing changed (a failed update's leftovers, which force resumes).
	Outdated int
}

// Upgrade replaces the group's template with template (nil keeps it) and sets force.
// The controller rolls the group when the template changed.
func (c *Client) Upgrade(ctx context.Context, name string, template *v1alpha1.NodeTemplate, force bool) (*UpgradeResult, error) {
	var res UpgradeResult
	ng, err := c.update(ctx, name, func(ng *v1alpha1.NodeGroup) error {
		if ng.DeletionTimestamp != nil {
			return fmt.Errorf("node group %s is being deleted", name)
		}
		if ng.Status.LaunchTemplate != nil {
			res.FromVersion = ng.Status.LaunchTemplate.Version
		}
		if template != nil && !templateEqual(ng.Spec.Template, *template) {
			ng.Spec.Template = *template.DeepCopy()
			res.TemplateChanged = true
		}
		ng.Spec.Force = force
		res.Outdated = outdated(ng)
		return nil
	})
	if err != nil {
		return nil, err
	}
	res.Generation = ng.Generation
	return &res, nil
}

// outdated counts the instances not on the group's current launch template version.
func outdated(ng *v1alpha1.NodeGroup) int {
	if ng.Status.LaunchTemplate == nil {
		return 0
	}
	n := 0
	for _, in := range ng.Status.Instances {
		if in.LaunchTemplateVersion != ng.Status.LaunchTemplate.Version {
			n++
		}
	}
	return n
}

// Delete deletes the group; the controller drains its nodes and removes its Auto
// Scaling group and launch template before the object goes.
func (c *Client) Delete(ctx context.Context, name string) error {
	ng, err := c.Get(ctx, name)
	if err != nil {
		return err
	}
	if err := c.c.Delete(ctx, ng); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return c.apiError("deleting node group "+name, err)
	}
	return nil
}

// ErrGone is what Wait's check gets for a group that no longer exists.
var ErrGone = errors.New("gone")

// Wait reads the group every Poll until check says done or fails, and calls observe
// with each version of it that differs from the last. A group that does not exist is
// passed as nil. It ends when ctx does.
func (c *Client) Wait(ctx context.Context, name string, check func(ng *v1alpha1.NodeGroup) (bool, error), observe func(ng *v1alpha1.NodeGroup)) (*v1alpha1.NodeGroup, error) {
	poll := c.Poll
	if poll <= 0 {
		poll = time.Second
	}
	lastRV := "-"
	for {
		cur, err := c.read(ctx, name)
		if err != nil {
			return nil, err
		}
		if cur != errAway {
			if rv := resourceVersion(cur); rv != lastRV {
				lastRV = rv
				if observe != nil {
					observe(cur)
				}
			}
			if done, err := check(cur); err != nil || done {
				return cur, err
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(poll):
		}
	}
}

// errAway stands for a group that could not be read for a while (the API server
// restarting); Wait tries again.
var errAway = &v1alpha1.NodeGroup{}

// read returns the group, nil when it does not exist, or errAway.
func (c *Client) read(ctx context.Context, name string) (*v1alpha1.NodeGroup, error) {
	var ng v1alpha1.NodeGroup
	err := c.c.Get(ctx, types.NamespacedName{Name: name}, &ng)
	switch {
	case err == nil:
		return &ng, nil
	case apierrors.IsNotFound(err) && !meta.IsNoMatchError(err):
		return nil, nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case retryable(err):
		return errAway, nil
	default:
		return nil, c.apiError("reading node group "+name, err)
	}
}

func resourceVersion(ng *v1alpha1.NodeGroup) string {
	if ng == nil {
		return ""
	}
	return ng.ResourceVersion
}

func retryable(err error) bool {
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || strings.Contains(err.Error(), "connection refused")
}

func ptr[T any](v T) *T { return &v }
