package eksbackend

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/util/retry"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/eksapi"
)

// updateRecord is one EKS update of a group, as UpdatesAnnotation lists it. Its status
// is derived from the group's status when read, until it ends; a new update freezes
// the status of those before it.
type updateRecord struct {
	ID        string               `json:"id"`
	Type      string               `json:"type"`
	Params    []eksapi.UpdateParam `json:"params"`
	CreatedAt time.Time            `json:"createdAt"`
	// Generation is the spec generation the update produced.
	Generation int64 `json:"generation"`
	// Token is the request's clientRequestToken: a retried request gets this update.
	Token string `json:"token,omitempty"`
	// Status and Errors are set once the update ended and a later one was recorded.
	Status string               `json:"status,omitempty"`
	Errors []eksapi.ErrorDetail `json:"errors,omitempty"`
}

// maxRecords bounds the updates kept on a group (an annotation is small).
const maxRecords = 20

func records(ng *v1alpha1.NodeGroup) []updateRecord {
	var rs []updateRecord
	if raw, ok := ng.Annotations[UpdatesAnnotation]; ok {
		_ = json.Unmarshal([]byte(raw), &rs) // a mangled annotation reads as no updates
	}
	return rs
}

// derive is a record's status and errors as the group's status says now.
func derive(ng *v1alpha1.NodeGroup, r updateRecord) (string, []eksapi.ErrorDetail) {
	if r.Status != "" {
		return r.Status, r.Errors
	}
	st := ng.Status
	if u := st.Update; u != nil && u.Phase == v1alpha1.UpdatePhaseFailed && u.FailedGeneration == r.Generation {
		detail := eksapi.ErrorDetail{ErrorCode: string(v1alpha1.IssuePodEvictionFailure), ErrorMessage: u.Message}
		for _, is := range st.Health.Issues {
			if is.Code == v1alpha1.IssuePodEvictionFailure || is.Code == v1alpha1.IssueNodeCreationFailure {
				detail.ErrorCode, detail.ResourceIDs = string(is.Code), is.ResourceIDs
				break
			}
		}
		return eksapi.UpdateFailed, []eksapi.ErrorDetail{detail}
	}
	if st.ObservedGeneration >= r.Generation && st.Update == nil {
		return eksapi.UpdateSuccessful, nil
	}
	return eksapi.UpdateInProgress, nil
}

func toUpdate(ng *v1alpha1.NodeGroup, r updateRecord) eksapi.Update {
	u := eksapi.Update{ID: r.ID, Type: r.Type, Params: r.Params, CreatedAt: eksapi.NewTime(r.CreatedAt), Errors: []eksapi.ErrorDetail{}}
	var errs []eksapi.ErrorDetail
	u.Status, errs = derive(ng, r)
	u.Errors = append(u.Errors, errs...)
	if u.Params == nil {
		u.Params = []eksapi.UpdateParam{}
	}
	return u
}

// DescribeUpdate finds one of the group's updates.
func (b *Backend) DescribeUpdate(ctx context.Context, cluster, nodegroup, id string) (eksapi.Update, error) {
	ng, err := b.get(ctx, cluster, nodegroup)
	if err != nil {
		return eksapi.Update{}, err
	}
	for _, r := range records(ng) {
		if r.ID == id {
			return toUpdate(ng, r), nil
		}
	}
	return eksapi.Update{}, eksapi.NotFound("No update found for ID: %s.", id)
}

// ListUpdates lists the group's update IDs, oldest first.
func (b *Backend) ListUpdates(ctx context.Context, cluster, nodegroup string) ([]string, error) {
	ng, err := b.get(ctx, cluster, nodegroup)
	if err != nil {
		return nil, err
	}
	ids := []string{}
	for _, r := range records(ng) {
		ids = append(ids, r.ID)
	}
	return ids, nil
}

// freeze refuses a new update while the group is busy, and otherwise fixes the status
// of the updates before it (all ended), so that later changes of the group's status do
// not rewrite their outcome.
func freeze(ng *v1alpha1.NodeGroup, rs []updateRecord) error {
	if ng.DeletionTimestamp != nil {
		return eksapi.InUse("Nodegroup %s is being deleted", ng.Name)
	}
	for i := range rs {
		s, errs := derive(ng, rs[i])
		if s == eksapi.UpdateInProgress {
			return eksapi.InUse("Nodegroup %s has update %s in progress; wait for it to finish", ng.Name, rs[i].ID)
		}
		rs[i].Status, rs[i].Errors = s, errs
	}
	if u := ng.Status.Update; u != nil && u.Phase != v1alpha1.UpdatePhaseFailed {
		return eksapi.InUse("Nodegroup %s is updating (%s); wait for it to finish", ng.Name, u.Phase)
	}
	return nil
}

// change applies an update to the group: mutate changes a copy of the spec (and
// annotations) and returns the update's parameters or an *eksapi.Error. It is retried on
// conflict, so it must start from the group it is given each time.
func (b *Backend) change(ctx context.Context, cluster, name, typ, token string, mutate func(ng *v1alpha1.NodeGroup) ([]eksapi.UpdateParam, error)) (eksapi.Update, error) {
	var out eksapi.Update
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ng, err := b.get(ctx, cluster, name)
		if err != nil {
			return err
		}
		rs := records(ng)
		if i := slices.IndexFunc(rs, func(r updateRecord) bool { return token != "" && r.Token == token }); i >= 0 {
			out = toUpdate(ng, rs[i])
			return nil
		}
		if err := freeze(ng, rs); err != nil {
			return err
		}
		next := ng.DeepCopy()
		params, err := mutate(next)
		if err != nil {
			return err
		}
		if err := checkValid(next); err != nil {
			return err
		}
		gen := ng.Generation
		if !equality.Semantic.DeepEqual(ng.Spec, next.Spec) {
			gen++
		}
		rec := updateRecord{ID: string(uuid.NewUUID()), Type: typ, Params: params, CreatedAt: b.now().UTC().Truncate(time.Millisecond), Generation: gen, Token: token}
		rs = append(rs, rec)
		if len(rs) > maxRecords {
			rs = rs[len(rs)-maxRecords:]
		}
		if err := setJSON(next, UpdatesAnnotation, rs); err != nil {
			return err
		}
		if err := b.c.Update(ctx, next); err != nil {
			if apierrors.IsInvalid(err) {
				return eksapi.InvalidParameter("the change is not valid: %s", invalidText(err))
			}
			return err
		}
		if next.Generation != gen {
			// Another writer's change landed with ours: the update ends with the
			// generation that holds it.
			rs[len(rs)-1].Generation = next.Generation
			if err := setJSON(next, UpdatesAnnotation, rs); err == nil {
				_ = b.c.Update(ctx, next)
			}
		}
		out = toUpdate(next, rs[len(rs)-1])
		return nil
	})
	if err != nil {
		if _, ok := eksapi.AsError(err); ok {
			return eksapi.Update{}, err
		}
		return eksapi.Update{}, fmt.Errorf("updating NodeGroup %s: %w", name, err)
	}
	return out, nil
}

// UpdateNodegroupConfig changes the group's scaling, labels, taints or update config.
func (b *Backend) UpdateNodegroupConfig(ctx context.Context, cluster, name string, in *eksapi.UpdateNodegroupConfigRequest) (eksapi.Update, error) {
	return b.change(ctx, cluster, name, eksapi.UpdateTypeConfig, in.ClientRequestToken, func(ng *v1alpha1.NodeGroup) ([]eksapi.UpdateParam, error) {
		var params []eksapi.UpdateParam
		add := func(typ, value string) { params = append(params, eksapi.UpdateParam{Type: typ, Value: value}) }
		if s := in.ScalingConfig; s != nil {
			sc := &ng.Spec.Scaling
			d := sc.Desired()
			for _, f := range []struct {
				typ string
				in  *int32
				to  *int32
			}{{eksapi.ParamMinSize, s.MinSize, &sc.MinSize}, {eksapi.ParamMaxSize, s.MaxSize, &sc.MaxSize}, {eksapi.ParamDesiredSize, s.DesiredSize, &d}} {
				if f.in != nil {
					*f.to = *f.in
					add(f.typ, strconv.Itoa(int(*f.in)))
				}
			}
			sc.DesiredSize = &d
			if err := eksapi.CheckSizes(eksapi.ScalingConfig{MinSize: &sc.MinSize, MaxSize: &sc.MaxSize, DesiredSize: &d}); err != nil {
				return nil, err
			}
		}
		if l := in.Labels; l != nil {
			t := &ng.Spec.Template
			if t.Labels == nil {
				t.Labels = map[string]string{}
			}
			maps.Copy(t.Labels, l.AddOrUpdateLabels)
			for _, k := range l.RemoveLabels {
				delete(t.Labels, k)
			}
			if len(l.AddOrUpdateLabels) > 0 {
				add(eksapi.ParamLabelsToAdd, jsonText(l.AddOrUpdateLabels))
			}
			if len(l.RemoveLabels) > 0 {
				add(eksapi.ParamLabelsToRemove, jsonText(l.RemoveLabels))
			}
		}
		if t := in.Taints; t != nil {
			if err := applyTaints(&ng.Spec.Template, t); err != nil {
				return nil, err
			}
			if len(t.AddOrUpdateTaints) > 0 {
				add(eksapi.ParamTaintsToAdd, jsonText(t.AddOrUpdateTaints))
			}
			if len(t.RemoveTaints) > 0 {
				add(eksapi.ParamTaintsToRemove, jsonText(t.RemoveTaints))
			}
		}
		if u := in.UpdateConfig; u != nil {
			ng.Spec.UpdateConfig = &v1alpha1.UpdateConfig{MaxUnavailable: u.MaxUnavailable, MaxUnavailablePercentage: u.MaxUnavailablePercentage}
			if u.MaxUnavailable != nil {
				add(eksapi.ParamMaxUnavailable, strconv.Itoa(int(*u.MaxUnavailable)))
			} else {
				add(eksapi.ParamMaxUnavailablePercentage, strconv.Itoa(int(*u.MaxUnavailablePercentage)))
			}
			if u.UpdateStrategy != "" {
				ng.Spec.UpdateStrategy = v1alpha1.UpdateStrategy(u.UpdateStrategy)
				add(eksapi.ParamUpdateStrategy, u.UpdateStrategy)
			}
		}
		return params, nil
	})
}

// applyTaints adds or replaces taints by key and effect, and removes taints by key (and
// effect, when given), as EKS does.
func applyTaints(t *v1alpha1.NodeTemplate, in *eksapi.UpdateTaints) error {
	add, err := kubeTaints("taints.addOrUpdateTaints", in.AddOrUpdateTaints)
	if err != nil {
		return err
	}
	for _, r := range in.RemoveTaints {
		var effect corev1.TaintEffect
		if r.Effect != "" {
			e, ok := KubeEffect(r.Effect)
			if !ok {
				return eksapi.InvalidParameter("taints.removeTaints: taint %s has effect %q; want one of NO_SCHEDULE, NO_EXECUTE, PREFER_NO_SCHEDULE", r.Key, r.Effect)
			}
			effect = e
		}
		t.Taints = slices.DeleteFunc(t.Taints, func(x corev1.Taint) bool { return x.Key == r.Key && (effect == "" || x.Effect == effect) })
	}
	for _, a := range add {
		i := slices.IndexFunc(t.Taints, func(x corev1.Taint) bool { return x.Key == a.Key && x.Effect == a.Effect })
		if i >= 0 {
			t.Taints[i] = a
		} else {
			t.Taints = append(t.Taints, a)
		}
	}
	sort.SliceStable(t.Taints, func(i, j int) bool { return t.Taints[i].Key < t.Taints[j].Key })
	return nil
}

// UpdateNodegroupVersion points the group's template at a release's AMI (the latest of
// its family when none is given), or, with launchTemplate, at another version of the
// group's own launch template (and a release only when one is given); the NodeGroup
// controller then rolls the group onto it, a managed upgrade. force lets the drain
// delete pods a disruption budget protects.
func (b *Backend) UpdateNodegroupVersion(ctx context.Context, cluster, name string, in *eksapi.UpdateNodegroupVersionRequest) (eksapi.Update, error) {
	if in.Version != "" && in.Version != b.info.Cluster.Version {
		return eksapi.Update{}, eksapi.InvalidParameter("version: the cluster runs Kubernetes %s, and its node groups run it too, not %s", b.info.Cluster.Version, in.Version)
	}
	if b.releases == nil && (in.LaunchTemplate == nil || in.ReleaseVersion != "") {
		return eksapi.Update{}, eksapi.InvalidRequest("the local EKS knows no releases to update node group %s to", name)
	}
	return b.change(ctx, cluster, name, eksapi.UpdateTypeVersion, in.ClientRequestToken, func(ng *v1alpha1.NodeGroup) ([]eksapi.UpdateParam, error) {
		var params []eksapi.UpdateParam
		if lt := in.LaunchTemplate; lt != nil {
			p, err := setTemplateVersion(ng, lt)
			if err != nil {
				return nil, err
			}
			params = append(params, p...)
		}
		if in.LaunchTemplate == nil || in.ReleaseVersion != "" {
			p, err := b.setRelease(ng, name, in.ReleaseVersion)
			if err != nil {
				return nil, err
			}
			params = append(params, p...)
		}
		ng.Spec.Force = in.Force
		return append(params, eksapi.UpdateParam{Type: eksapi.ParamForce, Value: strconv.FormatBool(in.Force)}), nil
	})
}

// setTemplateVersion points the group at another version of its own launch template.
func setTemplateVersion(ng *v1alpha1.NodeGroup, lt *eksapi.LaunchTemplate) ([]eksapi.UpdateParam, error) {
	ref := ng.Spec.Template.LaunchTemplate
	switch {
	case ref == nil:
		return nil, eksapi.InvalidParameter("launchTemplate: node group %s was not created with a launch template; give releaseVersion", ng.Name)
	case !sameTemplate(ng, lt):
		return nil, eksapi.InvalidParameter("launchTemplate: node group %s runs launch template %s; an update takes another version of it, not another template", ng.Name, firstNonEmpty(ref.ID, ref.Name))
	}
	v := lt.Version
	if v == "" {
		v = "$Default"
	}
	ref.Version = v
	n := firstNonEmpty(lt.Name, ref.Name)
	if s := ng.Status.SourceLaunchTemplate; n == "" && s != nil {
		n = s.Name
	}
	return []eksapi.UpdateParam{{Type: paramLaunchTemplateName, Value: n}, {Type: paramLaunchTemplateVersion, Value: v}}, nil
}

// setRelease points the group's template at release rel of its family (the latest when
// rel is "").
func (b *Backend) setRelease(ng *v1alpha1.NodeGroup, name, rel string) ([]eksapi.UpdateParam, error) {
	if im, _ := image(ng); im.AmiType == AmiTypeCustom {
		return nil, eksapi.InvalidParameter("releaseVersion: node group %s runs the custom AMI of its launch template; give launchTemplate with a new version instead", name)
	}
	fam, ami := family(ng), ""
	if rel == "" {
		var ok bool
		if rel, ami, ok = b.releases.Latest(fam); !ok {
			return nil, eksapi.InvalidRequest("the local EC2 has no %s image to update node group %s to", fam, name)
		}
	} else {
		var err error
		if ami, err = b.image(fam, rel); err != nil {
			return nil, err
		}
	}
	im, _ := image(ng)
	im.ReleaseVersion, im.AMIID = rel, ami
	if err := setJSON(ng, ImageAnnotation, im); err != nil {
		return nil, err
	}
	ng.Spec.Template.AMIID = ami
	return []eksapi.UpdateParam{
		{Type: eksapi.ParamVersion, Value: b.info.Cluster.Version},
		{Type: eksapi.ParamReleaseVersion, Value: rel},
	}, nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func jsonText(v any) string {
	b, _ := json.Marshal(v) // maps of strings and slices of taints always encode
	return string(b)
}
