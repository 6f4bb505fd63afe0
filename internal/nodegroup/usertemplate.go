package nodegroup

import (
	"context"
	"errors"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/nodegroup/usertemplate"
)

// userTemplate reads the user's launch template a group names (nil when it names
// none) and returns the spec to render user data from: the template's user data in
// place of spec.template.userData, and, when the template names an ImageId, that
// custom AMI (whose user data EKS uses alone). It fills st.spec's instance types from
// the template when the group names none. ok is false when the template cannot be
// used: the issue says why, and the group waits for its spec or the template to change.
func (r *Reconciler) userTemplate(ctx context.Context, st *state, spec *v1alpha1.NodeGroup) (ut *usertemplate.Template, out *v1alpha1.NodeGroup, ok bool, err error) {
	ref := st.spec.Spec.Template.LaunchTemplate
	if ref == nil {
		return nil, spec, true, nil
	}
	ng := st.ng
	ut, err = usertemplate.Read(ctx, r.cloud.ec2, usertemplate.Ref{ID: ref.ID, Name: ref.Name, Version: ref.Version})
	code := v1alpha1.IssueEc2LaunchTemplateInvalidConfig
	switch {
	case errors.Is(err, usertemplate.ErrNotFound):
		code = v1alpha1.IssueEc2LaunchTemplateNotFound
	case errors.Is(err, usertemplate.ErrInvalid):
	case err != nil:
		st.issues = append(st.issues, v1alpha1.Issue{Code: cloudIssue(err, v1alpha1.IssueEc2LaunchTemplateInvalidConfig), Message: err.Error()})
		return nil, nil, false, err
	default:
		err = ut.Check(len(spec.Spec.Template.InstanceTypes) > 0 && !defaultedTypes(ng))
	}
	if err != nil {
		msg := strings.TrimPrefix(strings.TrimPrefix(err.Error(), usertemplate.ErrInvalid.Error()+": "), usertemplate.ErrNotFound.Error()+": ")
		st.issues = append(st.issues, v1alpha1.Issue{Code: code, Message: msg})
		r.event(ng, corev1.EventTypeWarning, string(code), "ReadLaunchTemplate", "%s", msg)
		return nil, nil, false, nil
	}
	if len(st.spec.Spec.Template.InstanceTypes) == 0 || defaultedTypes(ng) {
		it := v1alpha1.DefaultInstanceType
		if ut.InstanceType != "" {
			it = ut.InstanceType
		}
		st.spec.Spec.Template.InstanceTypes = []string{it}
		ng.Status.InstanceType = it
	}
	out = spec.DeepCopy()
	out.Spec.Template.UserData = ut.UserData
	out.Spec.Template.InstanceTypes = st.spec.Spec.Template.InstanceTypes
	if ut.ImageID != "" {
		out.Spec.Template.AMIID = ut.ImageID
	}
	return ut, out, true, nil
}

// defaultedTypes says the group's stored spec names no instance types (the controller's
// working copy may have been defaulted).
func defaultedTypes(ng *v1alpha1.NodeGroup) bool { return len(ng.Spec.Template.InstanceTypes) == 0 }

// withUserTemplate carries the user's launch template's settings into the data of the
// group's own template, as EKS builds a managed node group's launch template from the
// user's: its security groups, key pair, metadata options, block devices and tags (the
// instance tags EKS sets win over the user's of the same key).
func withUserTemplate(d *templateData, ut *usertemplate.Template) {
	if ut == nil {
		return
	}
	if len(ut.SecurityGroupIDs) > 0 {
		d.SecurityGroupIDs = ut.SecurityGroupIDs
	}
	d.KeyName, d.MetadataOptions, d.BlockDevices = ut.KeyName, ut.MetadataOptions, ut.BlockDevices
	tags := map[string]string{}
	for _, ts := range ut.TagSpecifications {
		if ts.ResourceType != ec2types.ResourceTypeInstance {
			d.OtherTagSpecs = append(d.OtherTagSpecs, ts)
			continue
		}
		for _, tg := range ts.Tags {
			if tg.Key != nil && tg.Value != nil {
				tags[*tg.Key] = *tg.Value
			}
		}
	}
	maps.Copy(tags, d.Tags)
	d.Tags = tags
}
