package resource

// This file holds AWS::EKS::Nodegroup, a managed node group made through EKS's API;
// eks_access.go holds AWS::EKS::AccessEntry.

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
)

// eksWaitLimit bounds a wait for a node group or an update with no deadline of its own.
var eksWaitLimit = time.Hour

// eksTypes are the EKS resource types: managed node groups and access entries.
func eksTypes(cl Clients) map[string]Provisioner {
	return map[string]Provisioner{
		"AWS::EKS::Nodegroup":   &nodegroupType{cl: cl},
		"AWS::EKS::AccessEntry": &accessEntryType{cl: cl},
	}
}

// nodegroupType is AWS::EKS::Nodegroup. Ref is <cluster>/<nodegroup>, as AWS's.
type nodegroupType struct{ cl Clients }

var nodegroupKeys = []string{"AmiType", "CapacityType", "ClusterName", "DiskSize", "ForceUpdateEnabled", "InstanceTypes", "Labels",
	"LaunchTemplate", "NodeRepairConfig", "NodeRole", "NodegroupName", "ReleaseVersion", "RemoteAccess", "ScalingConfig", "Subnets",
	"Tags", "Taints", "UpdateConfig", "Version"}

// nodegroupReplaced are the properties whose change needs a new node group.
var nodegroupReplaced = []string{"AmiType", "CapacityType", "ClusterName", "DiskSize", "InstanceTypes", "NodeRole", "NodegroupName",
	"RemoteAccess", "Subnets"}

type nodegroupProps struct {
	in    eks.CreateNodegroupInput
	force bool
}

func readNodegroup(c *Call, props map[string]any) (nodegroupProps, error) {
	p := newPropReader(c)
	p.known(props, "#", nodegroupKeys...)
	p.required(props, "#", "ClusterName", "NodeRole", "Subnets")
	in := eks.CreateNodegroupInput{
		ClusterName: p.strPtr(props, "#", "ClusterName"), NodegroupName: p.strPtr(props, "#", "NodegroupName"),
		NodeRole: p.strPtr(props, "#", "NodeRole"), Subnets: p.strList(props, "#", "Subnets"),
		AmiType: ekstypes.AMITypes(p.str(props, "#", "AmiType")), CapacityType: ekstypes.CapacityTypes(p.str(props, "#", "CapacityType")),
		DiskSize: p.int32Ptr(props, "#", "DiskSize"), InstanceTypes: p.strList(props, "#", "InstanceTypes"),
		Labels: p.strMap(props, "#", "Labels"), ReleaseVersion: p.strPtr(props, "#", "ReleaseVersion"), Version: p.strPtr(props, "#", "Version"),
		Tags: p.strMap(props, "#", "Tags"),
	}
	if s := p.obj(props, "#", "ScalingConfig"); s != nil {
		p.known(s, "#/ScalingConfig", "DesiredSize", "MaxSize", "MinSize")
		in.ScalingConfig = &ekstypes.NodegroupScalingConfig{DesiredSize: p.int32Ptr(s, "#/ScalingConfig", "DesiredSize"),
			MaxSize: p.int32Ptr(s, "#/ScalingConfig", "MaxSize"), MinSize: p.int32Ptr(s, "#/ScalingConfig", "MinSize")}
	}
	for i, t := range p.objList(props, "#", "Taints") {
		at := fmt.Sprintf("#/Taints/%d", i)
		p.known(t, at, "Effect", "Key", "Value")
		in.Taints = append(in.Taints, ekstypes.Taint{Effect: ekstypes.TaintEffect(p.str(t, at, "Effect")), Key: p.strPtr(t, at, "Key"), Value: p.strPtr(t, at, "Value")})
	}
	if lt := p.obj(props, "#", "LaunchTemplate"); lt != nil {
		p.known(lt, "#/LaunchTemplate", "Id", "Name", "Version")
		in.LaunchTemplate = &ekstypes.LaunchTemplateSpecification{Id: p.strPtr(lt, "#/LaunchTemplate", "Id"),
			Name: p.strPtr(lt, "#/LaunchTemplate", "Name"), Version: p.strPtr(lt, "#/LaunchTemplate", "Version")}
	}
	if u := p.obj(props, "#", "UpdateConfig"); u != nil {
		p.known(u, "#/UpdateConfig", "MaxUnavailable", "MaxUnavailablePercentage", "UpdateStrategy")
		in.UpdateConfig = &ekstypes.NodegroupUpdateConfig{MaxUnavailable: p.int32Ptr(u, "#/UpdateConfig", "MaxUnavailable"),
			MaxUnavailablePercentage: p.int32Ptr(u, "#/UpdateConfig", "MaxUnavailablePercentage"),
			UpdateStrategy:           ekstypes.NodegroupUpdateStrategies(p.str(u, "#/UpdateConfig", "UpdateStrategy"))}
	}
	if r := p.obj(props, "#", "RemoteAccess"); r != nil {
		p.known(r, "#/RemoteAccess", "Ec2SshKey", "SourceSecurityGroups")
		p.required(r, "#/RemoteAccess", "Ec2SshKey")
		in.RemoteAccess = &ekstypes.RemoteAccessConfig{Ec2SshKey: p.strPtr(r, "#/RemoteAccess", "Ec2SshKey"),
			SourceSecurityGroups: p.strList(r, "#/RemoteAccess", "SourceSecurityGroups")}
	}
	if r := p.obj(props, "#", "NodeRepairConfig"); r != nil {
		p.known(r, "#/NodeRepairConfig", "Enabled")
		in.NodeRepairConfig = &ekstypes.NodeRepairConfig{Enabled: p.boolPtr(r, "#/NodeRepairConfig", "Enabled")}
	}
	out := nodegroupProps{in: in}
	if f := p.boolPtr(props, "#", "ForceUpdateEnabled"); f != nil {
		out.force = *f
	}
	return out, p.err
}

// splitNodegroupID splits <cluster>/<nodegroup>.
func splitNodegroupID(id string) (cluster, name string) {
	cluster, name, _ = strings.Cut(id, "/")
	return cluster, name
}

func (t *nodegroupType) Create(ctx context.Context, c *Call) (Result, error) {
	np, err := readNodegroup(c, c.Properties)
	if err != nil {
		return Result{}, err
	}
	in := np.in
	if in.NodegroupName == nil {
		in.NodegroupName = aws.String(c.LogicalID + "-" + physicalSuffix(12))
	}
	// The stack's tags are the node group's too; the aws: ones are EKS's reserved keys.
	for k, v := range c.Tags {
		if _, given := in.Tags[k]; !given && !strings.HasPrefix(k, "aws:") {
			if in.Tags == nil {
				in.Tags = map[string]string{}
			}
			in.Tags[k] = v
		}
	}
	out, err := t.cl.EKS.CreateNodegroup(ctx, &in)
	if err != nil {
		return Result{}, serviceFailure("Eks", err)
	}
	cluster, name := aws.ToString(out.Nodegroup.ClusterName), aws.ToString(out.Nodegroup.NodegroupName)
	ng, err := t.awaitStatus(ctx, cluster, name, "ACTIVE")
	if err != nil {
		// The group exists: its ID goes with the error, for the rollback to delete it.
		return Result{PhysicalID: cluster + "/" + name}, err
	}
	return nodegroupResult(ng), nil
}

func nodegroupResult(ng *ekstypes.Nodegroup) Result {
	id := aws.ToString(ng.ClusterName) + "/" + aws.ToString(ng.NodegroupName)
	return Result{PhysicalID: id, Attributes: map[string]string{"Arn": aws.ToString(ng.NodegroupArn), "ClusterName": aws.ToString(ng.ClusterName),
		"NodegroupName": aws.ToString(ng.NodegroupName), "Id": id}}
}

// nodegroupIssues says a node group's health issues as CloudFormation reports them.
func nodegroupIssues(ng *ekstypes.Nodegroup) string {
	var parts []string
	if ng.Health != nil {
		for _, i := range ng.Health.Issues {
			parts = append(parts, fmt.Sprintf("Issue(Code=%s, Message=%s, ResourceIds=[%s])", i.Code, aws.ToString(i.Message), strings.Join(i.ResourceIds, ", ")))
		}
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// awaitStatus polls the node group until it is want (ACTIVE), or fails with its health
// issues when it is CREATE_FAILED or DEGRADED.
func (t *nodegroupType) awaitStatus(ctx context.Context, cluster, name, want string) (*ekstypes.Nodegroup, error) {
	var ng *ekstypes.Nodegroup
	err := pollResource(ctx, eksWaitLimit, "node group "+name+" to be "+want, func() (bool, string, error) {
		out, err := t.cl.EKS.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: aws.String(cluster), NodegroupName: aws.String(name)})
		if err != nil {
			return false, "", serviceFailure("Eks", err)
		}
		ng = out.Nodegroup
		switch st := string(ng.Status); st {
		case want:
			return true, st, nil
		case "CREATE_FAILED", "DELETE_FAILED", "DEGRADED":
			return false, st, handlerErrorf("Resource handler returned message: \"Nodegroup %s in cluster %s is %s: %s\" (HandlerErrorCode: NotStabilized)", name, cluster, st, nodegroupIssues(ng))
		default:
			return false, st, nil
		}
	})
	return ng, err
}

// Update changes sizes, labels, taints and the update configuration with
// UpdateNodegroupConfig and the version, release or launch template version with
// UpdateNodegroupVersion, waiting for each update; other changes need a new group.
func (t *nodegroupType) Update(ctx context.Context, c *Call, old Result, oldProps map[string]any) (Result, error) {
	np, err := readNodegroup(c, c.Properties)
	if err != nil {
		return Result{}, err
	}
	op, err := readNodegroup(c, oldProps)
	if err != nil {
		return Result{}, err
	}
	for _, k := range nodegroupReplaced {
		if !reflect.DeepEqual(c.Properties[k], oldProps[k]) {
			return Result{}, ErrReplace
		}
	}
	nlt, olt := np.in.LaunchTemplate, op.in.LaunchTemplate
	if (nlt == nil) != (olt == nil) || nlt != nil && (aws.ToString(nlt.Id) != aws.ToString(olt.Id) || aws.ToString(nlt.Name) != aws.ToString(olt.Name)) {
		return Result{}, ErrReplace
	}
	if !reflect.DeepEqual(c.Properties["Tags"], oldProps["Tags"]) {
		return Result{}, handlerErrorf("Resource handler returned message: \"Changing the Tags of node group %s is not supported by the local EKS (it has no TagResource); give the node group another NodegroupName to replace it\"", old.PhysicalID)
	}
	cluster, name := splitNodegroupID(old.PhysicalID)
	if cfg, changed := configUpdate(np.in, op.in); changed {
		cfg.ClusterName, cfg.NodegroupName = aws.String(cluster), aws.String(name)
		out, err := t.cl.EKS.UpdateNodegroupConfig(ctx, cfg)
		if err != nil {
			return Result{}, serviceFailure("Eks", err)
		}
		if err := t.awaitUpdate(ctx, cluster, name, out.Update); err != nil {
			return Result{}, err
		}
	}
	if ver, changed := versionUpdate(np, op); changed {
		ver.ClusterName, ver.NodegroupName = aws.String(cluster), aws.String(name)
		out, err := t.cl.EKS.UpdateNodegroupVersion(ctx, ver)
		if err != nil {
			return Result{}, serviceFailure("Eks", err)
		}
		if err := t.awaitUpdate(ctx, cluster, name, out.Update); err != nil {
			return Result{}, err
		}
	}
	ng, err := t.awaitStatus(ctx, cluster, name, "ACTIVE")
	if err != nil {
		return Result{}, err
	}
	return nodegroupResult(ng), nil
}

// versionUpdate is the UpdateNodegroupVersion that takes a group from o to n.
func versionUpdate(n, o nodegroupProps) (*eks.UpdateNodegroupVersionInput, bool) {
	ver := &eks.UpdateNodegroupVersionInput{Force: n.force}
	changed := false
	if !reflect.DeepEqual(n.in.Version, o.in.Version) && n.in.Version != nil {
		ver.Version, changed = n.in.Version, true
	}
	if !reflect.DeepEqual(n.in.ReleaseVersion, o.in.ReleaseVersion) && n.in.ReleaseVersion != nil {
		ver.ReleaseVersion, changed = n.in.ReleaseVersion, true
	}
	if lt := n.in.LaunchTemplate; lt != nil && o.in.LaunchTemplate != nil && aws.ToString(lt.Version) != aws.ToString(o.in.LaunchTemplate.Version) {
		ver.LaunchTemplate, changed = lt, true
	}
	return ver, changed
}

// configUpdate is the UpdateNodegroupConfig that takes a group from o to n.
func configUpdate(n, o eks.CreateNodegroupInput) (*eks.UpdateNodegroupConfigInput, bool) {
	in := &eks.UpdateNodegroupConfigInput{}
	changed := false
	if !reflect.DeepEqual(n.ScalingConfig, o.ScalingConfig) && n.ScalingConfig != nil {
		in.ScalingConfig, changed = n.ScalingConfig, true
	}
	if !reflect.DeepEqual(n.UpdateConfig, o.UpdateConfig) && n.UpdateConfig != nil {
		in.UpdateConfig, changed = n.UpdateConfig, true
	}
	if !reflect.DeepEqual(n.NodeRepairConfig, o.NodeRepairConfig) && n.NodeRepairConfig != nil {
		in.NodeRepairConfig, changed = n.NodeRepairConfig, true
	}
	if !maps.Equal(n.Labels, o.Labels) {
		l := &ekstypes.UpdateLabelsPayload{AddOrUpdateLabels: map[string]string{}}
		for k, v := range n.Labels {
			if ov, ok := o.Labels[k]; !ok || ov != v {
				l.AddOrUpdateLabels[k] = v
			}
		}
		for _, k := range slices.Sorted(maps.Keys(o.Labels)) {
			if _, ok := n.Labels[k]; !ok {
				l.RemoveLabels = append(l.RemoveLabels, k)
			}
		}
		in.Labels, changed = l, true
	}
	if !reflect.DeepEqual(n.Taints, o.Taints) {
		t := &ekstypes.UpdateTaintsPayload{}
		same := func(a, b ekstypes.Taint) bool {
			return aws.ToString(a.Key) == aws.ToString(b.Key) && a.Effect == b.Effect
		}
		for _, nt := range n.Taints {
			if !slices.ContainsFunc(o.Taints, func(ot ekstypes.Taint) bool { return reflect.DeepEqual(ot, nt) }) {
				t.AddOrUpdateTaints = append(t.AddOrUpdateTaints, nt)
			}
		}
		for _, ot := range o.Taints {
			if !slices.ContainsFunc(n.Taints, func(nt ekstypes.Taint) bool { return same(nt, ot) }) {
				t.RemoveTaints = append(t.RemoveTaints, ot)
			}
		}
		in.Taints, changed = t, true
	}
	return in, changed
}

// awaitUpdate polls an update until it is Successful, or fails with its errors.
func (t *nodegroupType) awaitUpdate(ctx context.Context, cluster, name string, u *ekstypes.Update) error {
	id := aws.ToString(u.Id)
	return pollResource(ctx, eksWaitLimit, "update "+id+" of node group "+name, func() (bool, string, error) {
		out, err := t.cl.EKS.DescribeUpdate(ctx, &eks.DescribeUpdateInput{Name: aws.String(cluster), NodegroupName: aws.String(name), UpdateId: aws.String(id)})
		if err != nil {
			return false, "", serviceFailure("Eks", err)
		}
		switch st := out.Update.Status; st {
		case ekstypes.UpdateStatusSuccessful:
			return true, string(st), nil
		case ekstypes.UpdateStatusFailed, ekstypes.UpdateStatusCancelled:
			var errs []string
			for _, e := range out.Update.Errors {
				errs = append(errs, fmt.Sprintf("ErrorDetail(ErrorCode=%s, ErrorMessage=%s, ResourceIds=[%s])", e.ErrorCode, aws.ToString(e.ErrorMessage), strings.Join(e.ResourceIds, ", ")))
			}
			return false, string(st), handlerErrorf("Resource handler returned message: \"Update %s of nodegroup %s is %s: [%s]\" (HandlerErrorCode: NotStabilized)", id, name, st, strings.Join(errs, ", "))
		default:
			return false, string(st), nil
		}
	})
}

// Delete deletes the node group and waits until it is gone.
func (t *nodegroupType) Delete(ctx context.Context, _ *Call, r Result) error {
	cluster, name := splitNodegroupID(r.PhysicalID)
	if cluster == "" || name == "" {
		return nil // never made
	}
	_, err := t.cl.EKS.DeleteNodegroup(ctx, &eks.DeleteNodegroupInput{ClusterName: aws.String(cluster), NodegroupName: aws.String(name)})
	if serviceErrorCode(err) == "ResourceNotFoundException" {
		return nil
	}
	if err != nil && serviceErrorCode(err) != "ResourceInUseException" { // already being deleted
		return serviceFailure("Eks", err)
	}
	return pollResource(ctx, eksWaitLimit, "node group "+name+" to be deleted", func() (bool, string, error) {
		out, err := t.cl.EKS.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: aws.String(cluster), NodegroupName: aws.String(name)})
		if serviceErrorCode(err) == "ResourceNotFoundException" {
			return true, "deleted", nil
		}
		if err != nil {
			return false, "", serviceFailure("Eks", err)
		}
		if out.Nodegroup.Status == ekstypes.NodegroupStatusDeleteFailed {
			return false, "", handlerErrorf("Resource handler returned message: \"Nodegroup %s in cluster %s is DELETE_FAILED: %s\"", name, cluster, nodegroupIssues(out.Nodegroup))
		}
		return false, string(out.Nodegroup.Status), nil
	})
}
