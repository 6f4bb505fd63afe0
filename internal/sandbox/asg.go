package sandbox

import (
	"context"

	"github.com/nodejoin/nodejoin/internal/localaws"
	"github.com/nodejoin/nodejoin/internal/sandbox/instance"
	"github.com/nodejoin/nodejoin/internal/sandbox/launcher"
)

// asgAdapter lets the local cloud's Auto Scaling groups launch local instances
// (localaws.Launcher) through the cluster's launcher: from their launch template's user
// data, type, instance profile, zone and tags, with simulated kubelets unless kubelet
// asks for real ones. The launcher starts on the first launch, since the local cloud
// starts before it.
type asgAdapter struct {
	ensure  func(context.Context) (*launcher.Launcher, error)
	current func() *launcher.Launcher
	kubelet instance.KubeletKind
}

// Launch starts an instance and returns once EC2 shows it running.
func (a *asgAdapter) Launch(ctx context.Context, ls localaws.LaunchSpec) (string, error) {
	l, err := a.ensure(ctx)
	if err != nil {
		return "", &localaws.LaunchError{Code: "InternalFailure", Message: "The local instance provider is not available: " + err.Error()}
	}
	role := ls.Role
	if role != "" {
		// Only a NodeGroup's role is mapped (deny by default); any other group's role is
		// mapped by whoever made the group, as on EKS.
		if _, err := l.EnsureRoleAccess(ctx, ls.GroupName, role); err != nil {
			return "", &localaws.LaunchError{Code: "InternalFailure", Message: err.Error()}
		}
	}
	id, err := l.Launch(ctx, launcher.GroupInstance{
		Group: ls.GroupName, InstanceType: ls.InstanceType, ImageID: ls.ImageID, UserData: ls.UserData,
		Role: role, Zone: ls.AvailabilityZone, Tags: ls.Tags, Kubelet: a.kubelet,
	})
	if err != nil {
		return "", &localaws.LaunchError{Code: "InternalFailure", Message: "The local instance could not start: " + err.Error()}
	}
	return id, nil
}

// Terminate terminates a local instance; one already gone is no error.
func (a *asgAdapter) Terminate(ctx context.Context, id string) error {
	l := a.current()
	if l == nil {
		return nil
	}
	return l.Terminate(ctx, id)
}
