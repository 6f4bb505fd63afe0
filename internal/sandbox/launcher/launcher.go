// Package launcher launches a sandbox cluster's local instances and follows their
// joins. One Launcher per cluster starts the instance provider, lets the nodes in (their
// access entry or a bootstrap token), launches batches of nodes and waits until they are
// Ready (Run, for `up` and `add node`), launches and terminates single instances for the
// local cloud's Auto Scaling groups (Launch, Terminate), and runs their simulated
// kubelets. It imports the cluster it launches into (controlplane, sandbox/controller),
// the instance provider (sandbox/instance) and the join readers (sandbox/joinstatus,
// sandbox/joinlog, sandbox/progress, kubeletsim); nothing imports it but the
// sandbox.
package launcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/bootstraptoken"
	"github.com/nodejoin/nodejoin/internal/controlplane"
	"github.com/nodejoin/nodejoin/internal/sandbox/controller"
	"github.com/nodejoin/nodejoin/internal/sandbox/instance"
	"github.com/nodejoin/nodejoin/internal/sandbox/progress"
	"github.com/nodejoin/nodejoin/internal/toolbin"
)

// LocalNodeGroup is the node group of the instances Run launches: their bootstrap
// token is its, and they are tagged for it.
const LocalNodeGroup = "local"

// nodeTags are the tags of the instances Run launches, as a node group tags its
// instances: its name under eks:nodegroup-name and the cluster's tag. The CSR policy
// approves a bootstrap token's client certificate only for an instance tagged for the
// token's node group and the cluster (csr.NodeGroupTag, csr.ClusterTagPrefix; the
// launcher does not import the control plane).
func nodeTags(cluster string) map[string]string {
	return map[string]string{"eks:nodegroup-name": LocalNodeGroup, "kubernetes.io/cluster/" + cluster: "owned"}
}

// NodeRole is the instance role (and instance profile) of a cluster's local instances.
func NodeRole(cluster string) string { return "nodejoin-" + cluster + "-node" }

// Config is what a Launcher launches into.
type Config struct {
	Cluster    *controlplane.Cluster
	Controller *controller.Controller
	// BinDir holds the kubelet; default toolbin.Dir().
	BinDir string
	// Kubelet is the kind asked for; "" means real when this process can run real
	// kubelets.
	Kubelet instance.KubeletKind
	// GroupKubelet is the kind Auto Scaling's instances get (GroupInstance.Kubelet),
	// resolved already; real makes New find the real kubelet's binaries even when Run's
	// nodes are simulated.
	GroupKubelet instance.KubeletKind
	// Identity is how the nodes authenticate.
	Identity instance.Identity
	// ImageArchives lists the image archives real nodes import, given BinDir.
	ImageArchives func(binDir string) ([]string, error)
	Log           *slog.Logger
}

// Launcher launches a cluster's local instances; it runs in the process that runs the
// cluster.
type Launcher struct {
	prov      *instance.Provider
	client    kubernetes.Interface
	dyn       dynamic.Interface
	ctl       *controller.Controller
	kubelet   instance.KubeletKind
	identity  instance.Identity
	token     string // bootstrap-token mode; a secret
	simLogDir string
	log       *slog.Logger
	// cluster and hostEndpoint fill the template fields of a user's user data.
	cluster      instance.ClusterInfo
	hostEndpoint string

	mu    sync.Mutex
	roles map[string]bool // Auto Scaling roles whose access entry exists
	// boots are the boots of Auto Scaling instances under way (Launch's background
	// work: image import, nodeadm init). Close stops them and waits for them before it
	// terminates the instances, so that no boot starts a daemon after its instance was
	// cleaned up. closed (under mu) refuses launches once Close began.
	boots     sync.WaitGroup
	bootCtx   context.Context
	stopBoots context.CancelFunc
	closed    bool
}

// Kubelet is the kind of kubelet the nodes of Run get.
func (lr *Launcher) Kubelet() instance.KubeletKind { return lr.kubelet }

// Identity is how the nodes of Run authenticate.
func (lr *Launcher) Identity() instance.Identity { return lr.identity }

// Close stops the boots under way, waits for them, and terminates every instance.
func (lr *Launcher) Close(ctx context.Context) error {
	lr.mu.Lock()
	lr.closed = true
	lr.mu.Unlock()
	lr.stopBoots()
	lr.boots.Wait()
	return lr.prov.Close(ctx)
}

// New prepares the control plane for nodes (their access entry or bootstrap token) and
// starts the instance provider. Close terminates what it launched.
func New(ctx context.Context, cfg Config, rep *progress.Reporter) (*Launcher, error) {
	c := cfg.Cluster
	binDir := cfg.BinDir
	if binDir == "" {
		binDir = toolbin.Dir()
	}
	kind, why, err := resolveKubelet(cfg.Kubelet, c.Options().Network, binDir)
	if err != nil {
		return nil, err
	}
	if why != "" {
		rep.Note(why)
	}
	nodeadm, err := nodeadmPath()
	if err != nil {
		return nil, err
	}
	anyReal := kind == instance.KubeletReal || cfg.GroupKubelet == instance.KubeletReal
	kubeletPath, containerdPath := "", ""
	if anyReal {
		if kubeletPath, err = toolbin.Find(binDir, toolbin.Kubelet); err != nil {
			return nil, err
		}
		if containerdPath, err = exec.LookPath("containerd"); err != nil {
			return nil, err
		}
	}
	images := func() ([]string, error) { return cfg.ImageArchives(binDir) }
	if anyReal {
		if a, err := images(); err == nil && len(a) == 0 {
			rep.Note("no image archives in " + filepath.Join(binDir, "images") + " (`make images` builds them): pods on the nodes cannot start until images are loaded")
		}
	}
	caPEM, err := os.ReadFile(c.CAFile())
	if err != nil {
		return nil, err
	}
	opts := c.Options()
	cluster := instance.ClusterInfo{Name: c.Name(), Endpoint: c.InternalEndpoint(), CAPEM: caPEM, ServiceCIDR: opts.ServiceCIDR}
	prov, err := instance.New(instance.Config{
		Cluster: cluster,
		// Simulated kubelets run in this process, on the host side of the forwarded port.
		HostEndpoint: c.Endpoint(),
		Dir:          filepath.Join(c.StateDir(), "instances"),
		ClusterNS:    c.Namespace(),
		Bridge:       controlplane.BridgeName,
		NodeCIDR:     opts.NodeCIDR,
		Gateway:      opts.BridgeAddr(),
		Cloud:        cfg.Controller.Cloud(),
		EC2Endpoint:  cfg.Controller.EC2InternalURL(),
		Zone:         controller.DefaultRegion + "a",
		NodeadmPath:  nodeadm, KubeletPath: kubeletPath, ContainerdPath: containerdPath,
		ImageArchives: images,
		Log:           cfg.Log,
	})
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		return nil, errors.Join(err, prov.Close(ctx))
	}
	lr := &Launcher{prov: prov, client: client, dyn: dyn, ctl: cfg.Controller, kubelet: kind, identity: cfg.Identity,
		simLogDir: filepath.Join(c.StateDir(), "logs", "kubeletsim"), log: cfg.Log, roles: map[string]bool{},
		cluster: cluster, hostEndpoint: c.Endpoint()}
	lr.bootCtx, lr.stopBoots = context.WithCancel(context.Background())
	switch lr.identity {
	case instance.IdentityAWSIAM, instance.IdentityBootstrapToken:
		// The cluster's nodes' role is a node role: its tokens map to the node
		// identity, and a bootstrap token's client certificate is approved only for an
		// instance with a node role.
		if err := ensureAccessEntry(ctx, dyn, prov.RoleARN(NodeRole(c.Name())), false); err != nil {
			return nil, errors.Join(err, prov.Close(ctx))
		}
	}
	if lr.identity == instance.IdentityBootstrapToken {
		if lr.token, err = bootstraptoken.Mint(ctx, client, LocalNodeGroup, 24*time.Hour, time.Now()); err != nil {
			return nil, errors.Join(fmt.Errorf("minting a bootstrap token: %w", err), prov.Close(ctx))
		}
	}
	return lr, nil
}

// ensureAccessEntry maps an instance role to the node identity, as an EKS access entry
// of type EC2_LINUX does, unless an entry of the role exists under any name; a new one
// is named as the local EKS names entries (v1alpha1.EntryName). With requireProof, a
// new entry requires its nodes' instance proof (v1alpha1.InstanceProofAnnotation).
func ensureAccessEntry(ctx context.Context, dyn dynamic.Interface, roleARN string, requireProof bool) error {
	entries := dyn.Resource(nodejoinv1alpha1.NodeAccessEntryResource)
	list, err := entries.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing the NodeAccessEntries: %w", err)
	}
	want := nodejoinv1alpha1.CanonicalPrincipalARN(roleARN)
	for _, e := range list.Items {
		if arn, _, _ := unstructured.NestedString(e.Object, "spec", "principalARN"); nodejoinv1alpha1.CanonicalPrincipalARN(arn) == want {
			return nil
		}
	}
	meta := map[string]any{"name": nodejoinv1alpha1.EntryName(roleARN)}
	if requireProof {
		meta["annotations"] = map[string]any{nodejoinv1alpha1.InstanceProofAnnotation: "required"}
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": nodejoinv1alpha1.APIVersion,
		"kind":       "NodeAccessEntry",
		"metadata":   meta,
		"spec":       map[string]any{"principalARN": roleARN, "type": string(nodejoinv1alpha1.AccessEntryEC2Linux)},
	}}
	_, err = entries.Create(ctx, u, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the NodeAccessEntry for %s: %w", roleARN, err)
	}
	return nil
}
