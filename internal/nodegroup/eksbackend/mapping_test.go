package eksbackend

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/eksapi"
)

type oneRelease struct{}

func (oneRelease) Latest(v1alpha1.AMIFamily) (string, string, bool) {
	return "1.37.0-20261127", "ami-00000000000000a02", true
}

func (oneRelease) Image(_ v1alpha1.AMIFamily, r string) (string, bool) {
	return "ami-00000000000000a02", r == "1.37.0-20261127"
}

func (oneRelease) ReleaseOf(ami string) (v1alpha1.AMIFamily, string, bool) {
	return v1alpha1.AMIFamilyAmazonLinux2023, "1.37.0-20261127", ami == "ami-00000000000000a02"
}

// The amiType and release a group reports, from the catalog or from what the EKS API
// recorded.
func TestRelease(t *testing.T) {
	recorded := `{"amiType":"WINDOWS_FULL_2022_x86_64","releaseVersion":"2022.1","amiID":"ami-0000000000000000b"}`
	for _, tc := range []struct {
		name              string
		family            v1alpha1.AMIFamily
		ami, annotation   string
		releases          Releases
		wantType, wantRel string
	}{
		{"default image, catalog", "", "", "", oneRelease{}, "AL2023_x86_64_STANDARD", "1.37.0-20261127"},
		{"default image, no catalog", v1alpha1.AMIFamilyAmazonLinux2, "", "", nil, "AL2_x86_64", ""},
		{"release in the catalog", v1alpha1.AMIFamilyAmazonLinux2023, "ami-00000000000000a02", "", oneRelease{}, "AL2023_x86_64_STANDARD", "1.37.0-20261127"},
		{"image of another family", v1alpha1.AMIFamilyBottlerocket, "ami-00000000000000a02", "", oneRelease{}, "CUSTOM", ""},
		{"image outside the catalog", v1alpha1.AMIFamilyAmazonLinux2023, "ami-0000000000000000c", "", oneRelease{}, "CUSTOM", ""},
		{"recorded release", v1alpha1.AMIFamilyWindows, "ami-0000000000000000b", recorded, nil, "WINDOWS_FULL_2022_x86_64", "2022.1"},
		{"image changed by kubectl", v1alpha1.AMIFamilyWindows, "ami-0000000000000000c", recorded, nil, "CUSTOM", ""},
		{"recorded type of another family", v1alpha1.AMIFamilyBottlerocket, "", recorded, nil, "BOTTLEROCKET_x86_64", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ng := &v1alpha1.NodeGroup{Spec: v1alpha1.NodeGroupSpec{Template: v1alpha1.NodeTemplate{AMIFamily: tc.family, AMIID: tc.ami}}}
			if tc.annotation != "" {
				ng.Annotations = map[string]string{ImageAnnotation: tc.annotation}
			}
			typ, rel := Release(ng, tc.releases)
			if typ != tc.wantType || rel != tc.wantRel {
				t.Errorf("Release = %s %q, want %s %q", typ, rel, tc.wantType, tc.wantRel)
			}
		})
	}
}

func TestEffectsRoundTrip(t *testing.T) {
	for _, e := range []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute} {
		back, ok := KubeEffect(TaintEffect(e))
		if !ok || back != e {
			t.Errorf("%s → %s → %s", e, TaintEffect(e), back)
		}
	}
	for _, typ := range eksapi.AMITypes {
		if _, ok := FamilyOf(typ); !ok {
			t.Errorf("amiType %s the server accepts has no family", typ)
		}
	}
}

// EKS's scaling defaults fill what a request leaves out, within what it gives.
func TestScalingDefaults(t *testing.T) {
	i := func(v int32) *int32 { return &v }
	for _, tc := range []struct {
		in                 *eksapi.ScalingConfig
		minS, maxS, desire int32
	}{
		{nil, 1, 2, 2},
		{&eksapi.ScalingConfig{DesiredSize: i(5)}, 1, 5, 5},
		{&eksapi.ScalingConfig{MinSize: i(3)}, 3, 3, 3},
		{&eksapi.ScalingConfig{MaxSize: i(1)}, 1, 1, 1},
		{&eksapi.ScalingConfig{MinSize: i(0), MaxSize: i(10)}, 0, 10, 2},
		{&eksapi.ScalingConfig{DesiredSize: i(0)}, 0, 2, 0},
	} {
		s := scaling(tc.in)
		if s.MinSize != tc.minS || s.MaxSize != tc.maxS || *s.DesiredSize != tc.desire {
			t.Errorf("scaling(%+v) = %d/%d/%d, want %d/%d/%d", tc.in, s.MinSize, s.MaxSize, *s.DesiredSize, tc.minS, tc.maxS, tc.desire)
		}
		if err := eksapi.CheckSizes(eksapi.ScalingConfig{MinSize: &s.MinSize, MaxSize: &s.MaxSize, DesiredSize: s.DesiredSize}); err != nil {
			t.Errorf("scaling(%+v) does not fit: %v", tc.in, err)
		}
	}
}

func TestAccessEntryName(t *testing.T) {
	for _, arn := range []string{
		"arn:aws:iam::000000000000:role/Demo_Node",
		"arn:aws:iam::000000000000:role/a/b/" + "VeryLongRoleNameThatGoesOnAndOnAndOnUntilItIsSixtyFourChars12345",
		"arn:aws:iam::000000000000:role/@@",
	} {
		n := AccessEntryName(arn)
		if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 || len(n) > 63 || n != AccessEntryName(arn) {
			t.Errorf("AccessEntryName(%s) = %q: %v", arn, n, errs)
		}
	}
	if AccessEntryName("arn:aws:iam::000000000000:role/a/x") == AccessEntryName("arn:aws:iam::000000000000:role/b/x") {
		t.Error("two ARNs share a name")
	}
}

// An update's status follows the group's: in progress until the generation it made is
// observed with no rolling update running, failed when the update failed at it.
func TestDeriveUpdateStatus(t *testing.T) {
	rec := updateRecord{ID: "u", Generation: 4}
	failed := &v1alpha1.UpdateStatus{Phase: v1alpha1.UpdatePhaseFailed, FailedGeneration: 4, Message: "eviction refused"}
	for _, tc := range []struct {
		name   string
		status v1alpha1.NodeGroupStatus
		rec    updateRecord
		want   string
	}{
		{"not observed", v1alpha1.NodeGroupStatus{ObservedGeneration: 3}, rec, eksapi.UpdateInProgress},
		{"rolling", v1alpha1.NodeGroupStatus{ObservedGeneration: 4, Update: &v1alpha1.UpdateStatus{Phase: v1alpha1.UpdatePhaseUpgrade}}, rec, eksapi.UpdateInProgress},
		{"done", v1alpha1.NodeGroupStatus{ObservedGeneration: 4}, rec, eksapi.UpdateSuccessful},
		{"done later", v1alpha1.NodeGroupStatus{ObservedGeneration: 6}, rec, eksapi.UpdateSuccessful},
		{"failed", v1alpha1.NodeGroupStatus{ObservedGeneration: 4, Update: failed}, rec, eksapi.UpdateFailed},
		{"failed at another generation", v1alpha1.NodeGroupStatus{ObservedGeneration: 5, Update: &v1alpha1.UpdateStatus{Phase: v1alpha1.UpdatePhaseFailed, FailedGeneration: 5}}, rec, eksapi.UpdateInProgress},
		{"frozen", v1alpha1.NodeGroupStatus{ObservedGeneration: 6}, updateRecord{ID: "u", Generation: 4, Status: eksapi.UpdateFailed}, eksapi.UpdateFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ng := &v1alpha1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Generation: 6}, Status: tc.status}
			if got, _ := derive(ng, tc.rec); got != tc.want {
				t.Errorf("derive = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestMinorVersion(t *testing.T) {
	for in, want := range map[string]string{"1.37": "1.37", "v1.37.2": "1.37", "1.37.0-eks-1": "1.37", "1.37+": "1.37", "1": "1", "": ""} {
		if got := MinorVersion(in); got != want {
			t.Errorf("MinorVersion(%q) = %q, want %q", in, got, want)
		}
	}
}

// DescribeCluster gives a caller inside the VPC the private endpoint and any other the
// public one, as EKS resolves an endpoint with both accesses on.
func TestDescribeClusterEndpointByNetwork(t *testing.T) {
	info := ClusterInfo{Cluster: eksapi.Cluster{Name: "c1", Endpoint: "https://198.18.0.1:6443"}, PublicEndpoint: "https://127.0.0.1:6443"}
	b := New(nil, info, nil)
	for _, tc := range []struct {
		ctx  context.Context
		want string
	}{{t.Context(), "https://127.0.0.1:6443"}, {eksapi.WithVPCCaller(t.Context()), "https://198.18.0.1:6443"}} {
		c, err := b.DescribeCluster(tc.ctx, "c1")
		if err != nil || c.Endpoint != tc.want {
			t.Errorf("endpoint %q (%v), want %q", c.Endpoint, err, tc.want)
		}
	}
}
