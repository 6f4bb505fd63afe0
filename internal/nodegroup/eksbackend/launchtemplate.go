package eksbackend

import (
	"context"
	"errors"
	"strings"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/eksapi"
	"github.com/nodejoin/nodejoin/internal/nodegroup/usertemplate"
)

// AmiTypeCustom is the amiType of a node group whose launch template names its AMI.
const AmiTypeCustom = "CUSTOM"

// The EKS update parameter types of a launch template version update.
const (
	paramLaunchTemplateName    = "LaunchTemplateName"
	paramLaunchTemplateVersion = "LaunchTemplateVersion"
)

// WithLaunchTemplates lets the backend read users' launch templates (the local EC2's),
// so that CreateNodegroup refuses an unknown template, and the combinations EKS refuses,
// at once rather than as the group's health issue. It returns b.
func (b *Backend) WithLaunchTemplates(c usertemplate.DescribeVersions) *Backend {
	b.templates = c
	return b
}

// checkLaunchTemplate reads the launch template a CreateNodegroup request names, when
// the backend can, and applies EKS's rules: the template exists; it names no instance
// profile; an instance type in it or in instanceTypes, not both; an ImageId (a custom
// AMI) with user data of its own and amiType CUSTOM or none; CUSTOM only with an ImageId.
func (b *Backend) checkLaunchTemplate(ctx context.Context, in *eksapi.CreateNodegroupRequest) error {
	lt := in.LaunchTemplate
	if lt == nil || b.templates == nil {
		return nil
	}
	ut, err := usertemplate.Read(ctx, b.templates, usertemplate.Ref{ID: lt.ID, Name: lt.Name, Version: lt.Version})
	switch {
	case errors.Is(err, usertemplate.ErrNotFound), errors.Is(err, usertemplate.ErrInvalid):
		return eksapi.InvalidParameter("launchTemplate: %s", userMessage(err))
	case err != nil:
		return err
	}
	if err := ut.Check(len(in.InstanceTypes) > 0); err != nil {
		return eksapi.InvalidParameter("launchTemplate: %s", userMessage(err))
	}
	switch {
	case ut.ImageID == "" && in.AmiType == AmiTypeCustom:
		return eksapi.InvalidParameter("amiType: CUSTOM needs a launch template that names an ImageId; launch template %s version %s names none", ut.ID, ut.Version)
	case ut.ImageID != "" && in.AmiType != "" && in.AmiType != AmiTypeCustom:
		return eksapi.InvalidParameter("amiType: launch template %s version %s names a custom AMI (%s): leave amiType out, or give CUSTOM, not %s", ut.ID, ut.Version, ut.ImageID, in.AmiType)
	case ut.ImageID != "" && in.ReleaseVersion != "":
		return eksapi.InvalidParameter("releaseVersion: launch template %s version %s names a custom AMI (%s), which has no EKS release", ut.ID, ut.Version, ut.ImageID)
	case ut.ImageID != "":
		in.AmiType = AmiTypeCustom
	}
	return nil
}

// userMessage is a usertemplate error without its sentinel prefix.
func userMessage(err error) string {
	s := err.Error()
	for _, e := range []error{usertemplate.ErrInvalid, usertemplate.ErrNotFound} {
		s = strings.TrimPrefix(s, e.Error()+": ")
	}
	return s
}

// launchTemplateOf is the user's launch template a group reports: the version the
// controller last read, else the spec's reference; nil for a group without one.
func launchTemplateOf(ng *v1alpha1.NodeGroup) *eksapi.LaunchTemplate {
	ref := ng.Spec.Template.LaunchTemplate
	if ref == nil {
		return nil
	}
	if s := ng.Status.SourceLaunchTemplate; s != nil && (s.ID == ref.ID || s.Name == ref.Name) {
		return &eksapi.LaunchTemplate{Name: s.Name, ID: s.ID, Version: s.Version}
	}
	v := ref.Version
	if v == "" {
		v = "$Default"
	}
	return &eksapi.LaunchTemplate{Name: ref.Name, ID: ref.ID, Version: v}
}

// sameTemplate says the launch template an update names is the group's: EKS updates a
// group to another version of its template, never to another template.
func sameTemplate(ng *v1alpha1.NodeGroup, lt *eksapi.LaunchTemplate) bool {
	ref := ng.Spec.Template.LaunchTemplate
	if ref == nil {
		return false
	}
	src := ng.Status.SourceLaunchTemplate
	switch {
	case lt.ID != "":
		return lt.ID == ref.ID || src != nil && lt.ID == src.ID
	default:
		return lt.Name == ref.Name || src != nil && lt.Name == src.Name
	}
}
