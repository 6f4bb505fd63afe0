package launcher

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"

	"github.com/nodejoin/nodejoin/internal/sandbox/instance"
	"github.com/nodejoin/nodejoin/internal/userdata"
)

// GroupInstance is an instance an Auto Scaling group launches, from its launch
// template's user data, type, image, role, zone and tags.
type GroupInstance struct {
	Group        string
	InstanceType string
	ImageID      string
	UserData     []byte
	// Role is the instance profile's role; "" for none.
	Role    string
	Zone    string
	Tags    map[string]string
	Kubelet instance.KubeletKind
}

// Launch starts an instance for an Auto Scaling group and returns its ID once it runs;
// nodeadm (or the simulated kubelet) then runs in the background, and the join is
// followed, as on AWS, by whoever waits for the node. It shares the provider of Run's
// instances, so that they are listed and terminated together.
func (lr *Launcher) Launch(ctx context.Context, g GroupInstance) (string, error) {
	kind := g.Kubelet
	if kind == "" {
		kind = instance.KubeletSim
	}
	spec := instance.Spec{
		InstanceType: g.InstanceType, AMIFamily: SniffFamily(g.UserData), Identity: instance.IdentityAWSIAM, Role: g.Role,
		Kubelet: kind, UserData: g.UserData, Zone: g.Zone, ImageID: g.ImageID,
		Tags: g.Tags, AutoScalingGroup: g.Group,
		// No SubnetID: every local instance takes its address from the one subnet that
		// is the node range (localaws.DefaultSubnetID), whatever zone Auto Scaling
		// placed it in; the group's per-zone subnets only spread it over zones.
	}
	lr.mu.Lock()
	if lr.closed {
		lr.mu.Unlock()
		return "", errors.New("the local cluster is stopping: no instance is launched")
	}
	lr.boots.Add(1)
	lr.mu.Unlock()
	inst, err := lr.prov.Start(ctx, spec)
	if err != nil {
		lr.boots.Done()
		return "", err
	}
	go func() {
		defer lr.boots.Done()
		// Like a real instance's boot: it outlives the request that launched it, but
		// not the launcher (Close).
		ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		defer cancel()
		defer context.AfterFunc(lr.bootCtx, cancel)()
		if inst.Kubelet == instance.KubeletReal {
			if _, err := inst.ImportImages(ctx); err != nil {
				lr.log.Warn("importing images into an Auto Scaling instance failed", "instance", inst.ID, "err", err)
				return
			}
		}
		if err := inst.Init(ctx, lr.simRunner()); err != nil {
			lr.log.Warn("an Auto Scaling instance's nodeadm init failed", "instance", inst.ID, "group", g.Group, "err", err)
		}
	}()
	return inst.ID, nil
}

// Terminate terminates a local instance; one already gone is no error.
func (lr *Launcher) Terminate(ctx context.Context, id string) error {
	for _, inst := range lr.prov.Instances() {
		if inst.ID == id {
			return lr.prov.Terminate(ctx, inst)
		}
	}
	return nil
}

// EnsureRoleAccess maps the instance role of an Auto Scaling group's instances to the
// node identity, as EKS creates an EC2_LINUX access entry for a managed node group's
// role, only when a NodeGroup owns the group: nodejoin's node groups and the local EKS's
// managed ones are NodeGroup objects, and their Auto Scaling group is named after one
// (nodegroup.ResourceNames: eks-<name>-<uid>). Any other group's
// role (a CloudFormation stack's, eksctl's, a bastion's group) gets no entry: on EKS
// its creator maps it (an AWS::EKS::AccessEntry, `aws eks create-access-entry --type
// EC2_LINUX`, or aws-auth), and mapping every launched role would make any instance
// with a role a node. It reports whether the role is mapped. An entry it creates requires the nodes'
// instance proof, which nodeadm sends from the local EC2's signed identity document.
func (lr *Launcher) EnsureRoleAccess(ctx context.Context, group, role string) (bool, error) {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	if lr.roles[role] {
		return true, nil
	}
	owner, err := nodeGroupOwning(ctx, lr.dyn, group)
	if err != nil {
		return false, err
	}
	if owner == "" {
		lr.log.Info("no access entry made for an Auto Scaling group's role: no NodeGroup owns the group, so its creator maps the role (aws eks create-access-entry --type EC2_LINUX, or aws-auth)",
			"autoScalingGroup", group, "role", role)
		return false, nil
	}
	if err := ensureAccessEntry(ctx, lr.dyn, lr.prov.RoleARN(role), true); err != nil {
		return false, err
	}
	lr.log.Info("access entry made for a node group's role", "nodegroup", owner, "autoScalingGroup", group, "role", role)
	lr.roles[role] = true
	return true, nil
}

// nodeGroupOwning returns the name of the NodeGroup whose Auto Scaling group is group,
// or "" when none is.
func nodeGroupOwning(ctx context.Context, dyn dynamic.Interface, group string) (string, error) {
	list, err := dyn.Resource(nodejoinv1alpha1.NodeGroupResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("listing the NodeGroups: %w", err)
	}
	// By the name the NodeGroup controller gives its group, never by the status, which
	// whoever may write the status could point at any group.
	for _, ng := range list.Items {
		if group == "eks-"+ng.GetName()+"-"+string(ng.GetUID()) {
			return ng.GetName(), nil
		}
	}
	return "", nil
}

// SniffFamily tells the AMI family a node's user data is written for, for the record:
// nodeadm reads every format whatever the family. Gzip data is looked at inflated.
func SniffFamily(userData []byte) nodejoinv1alpha1.AMIFamily {
	if IsGzip(userData) {
		zr, err := gzip.NewReader(bytes.NewReader(userData))
		if err == nil {
			inflated, _ := io.ReadAll(io.LimitReader(zr, userdata.MaxSize))
			userData = inflated
		}
	}
	trimmed := bytes.TrimSpace(userData)
	// TOML comments may come before Bottlerocket's settings.
	for bytes.HasPrefix(trimmed, []byte("#")) && !bytes.HasPrefix(trimmed, []byte("#!")) {
		_, rest, _ := bytes.Cut(trimmed, []byte("\n"))
		trimmed = bytes.TrimSpace(rest)
	}
	switch {
	case bytes.HasPrefix(trimmed, []byte("[settings")), bytes.HasPrefix(trimmed, []byte("settings.")):
		return nodejoinv1alpha1.AMIFamilyBottlerocket
	case bytes.Contains(userData, []byte("/etc/eks/bootstrap.sh")):
		return nodejoinv1alpha1.AMIFamilyAmazonLinux2
	}
	return nodejoinv1alpha1.AMIFamilyAmazonLinux2023
}
