package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"k8s.io/client-go/dynamic"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/localaws"
	"github.com/nodejoin/nodejoin/internal/sandbox/instance"
)

// asgLauncher launches the local cloud's Auto Scaling instances as local instances
// (localaws.Launcher): from their launch template's user data, type, instance
// profile, zone and tags, with simulated kubelets unless Options.NodeGroupKubelet asks
// for real ones. They share the provider of the cluster's other instances, so `nodejoin
// get nodes` lists them, and nodejoin down terminates them.
type asgLauncher struct {
	s *Sandbox

	mu    sync.Mutex
	roles map[string]bool // roles whose access entry exists
}

func newASGLauncher(s *Sandbox) *asgLauncher {
	return &asgLauncher{s: s, roles: map[string]bool{}}
}

// Launch starts an instance and returns once EC2 shows it running; nodeadm (or the
// simulated kubelet) then runs in the background, and the join is followed, as on
// AWS, by whoever waits for the node.
func (l *asgLauncher) Launch(ctx context.Context, ls localaws.LaunchSpec) (string, error) {
	s := l.s
	w, err := s.ensureWorkers(ctx, nil)
	if err != nil {
		return "", &localaws.LaunchError{Code: "InternalFailure", Message: "The local instance provider is not available: " + err.Error()}
	}
	role := ""
	if ls.IAMInstanceProfile != "" {
		var ok bool
		if role, ok = w.ctl.Cloud().IAM.InstanceProfileRole(ls.IAMInstanceProfile); !ok {
			return "", &localaws.LaunchError{Code: "InvalidParameterValue",
				Message: fmt.Sprintf("Value (%s) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name", ls.IAMInstanceProfile)}
		}
		if err := l.ensureAccess(ctx, w, role); err != nil {
			return "", &localaws.LaunchError{Code: "InternalFailure", Message: err.Error()}
		}
	}
	kind := instance.KubeletKind(s.opts.NodeGroupKubelet)
	if kind == "" {
		kind = instance.KubeletSim
	}
	spec := instance.Spec{
		InstanceType: ls.InstanceType, AMIFamily: sniffFamily(ls.UserData), Identity: instance.IdentityAWSIAM, Role: role,
		Kubelet: kind, UserData: ls.UserData, Zone: ls.AvailabilityZone, ImageID: ls.ImageID,
		Tags: ls.Tags, AutoScalingGroup: ls.GroupName,
		// No SubnetID: every local instance takes its address from the one subnet that
		// is the node range (localaws.DefaultSubnetID), whatever zone Auto Scaling
		// placed it in; the group's per-zone subnets only spread it over zones.
	}
	inst, err := w.prov.Start(ctx, spec)
	if err != nil {
		return "", &localaws.LaunchError{Code: "InternalFailure", Message: "The local instance could not start: " + err.Error()}
	}
	go func() {
		// Like a real instance's boot: it outlives the request that launched it.
		ctx := context.WithoutCancel(ctx)
		if inst.Kubelet == instance.KubeletReal {
			if _, err := inst.ImportImages(ctx); err != nil {
				s.log.Warn("importing images into an Auto Scaling instance failed", "instance", inst.ID, "err", err)
				return
			}
		}
		if err := inst.Init(ctx, w.simRunner()); err != nil {
			s.log.Warn("an Auto Scaling instance's nodeadm init failed", "instance", inst.ID, "group", ls.GroupName, "err", err)
		}
	}()
	return inst.ID, nil
}

// Terminate terminates a local instance; one already gone is no error.
func (l *asgLauncher) Terminate(ctx context.Context, id string) error {
	w := l.s.currentWorkers()
	if w == nil {
		return nil
	}
	for _, inst := range w.prov.Instances() {
		if inst.ID == id {
			return w.prov.Terminate(ctx, inst)
		}
	}
	return nil
}

// ensureAccess maps a node group's instance role to the node identity, as EKS creates
// an EC2_LINUX access entry for a managed node group's role.
func (l *asgLauncher) ensureAccess(ctx context.Context, w *workers, role string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.roles[role] {
		return nil
	}
	c := l.s.cluster
	dyn, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		return err
	}
	arn := w.prov.RoleARN(role)
	if err := ensureAccessEntry(ctx, dyn, role, arn); err != nil {
		return err
	}
	l.roles[role] = true
	return nil
}

// sniffFamily tells the AMI family a node's user data is written for, for the record:
// nodeadm reads every format whatever the family.
func sniffFamily(userData []byte) nodejoinv1alpha1.AMIFamily {
	switch {
	case bytes.HasPrefix(bytes.TrimSpace(userData), []byte("[settings")):
		return nodejoinv1alpha1.AMIFamilyBottlerocket
	case bytes.Contains(userData, []byte("/etc/eks/bootstrap.sh")):
		return nodejoinv1alpha1.AMIFamilyAmazonLinux2
	}
	return nodejoinv1alpha1.AMIFamilyAmazonLinux2023
}

// ensureWorkers returns the cluster's instance provider and workers, starting them
// with Start's node options when nothing started them yet.
func (s *Sandbox) ensureWorkers(ctx context.Context, rep *reporter) (*workers, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.w != nil {
		return s.w, nil
	}
	if s.cluster == nil || s.controller == nil {
		return nil, errors.New("the cluster is not started")
	}
	if rep == nil {
		rep = newReporter(nil)
	}
	o := s.opts.Nodes
	if o.Count == 0 && o.Kubelet == "" && s.opts.NodeGroupKubelet != "" {
		o.Kubelet = s.opts.NodeGroupKubelet
	}
	w, err := startWorkers(ctx, s, o, rep)
	if err != nil {
		return nil, err
	}
	s.w = w
	return w, nil
}

// currentWorkers returns the workers, nil when none started.
func (s *Sandbox) currentWorkers() *workers {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.w
}
