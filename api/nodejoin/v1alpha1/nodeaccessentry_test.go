package v1alpha1

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsyaml "sigs.k8s.io/yaml"
)

func TestNodeAccessEntryValidate(t *testing.T) {
	for _, tc := range []struct {
		arn, typ, want, canonical string
	}{
		{arn: "arn:aws:iam::111122223333:role/NodeRole", canonical: "arn:aws:iam::111122223333:role/NodeRole"},
		{arn: "arn:aws:iam::111122223333:role/eks/nodes/NodeRole", typ: "EC2_WINDOWS", canonical: "arn:aws:iam::111122223333:role/NodeRole"},
		{arn: "arn:aws-us-gov:iam::111122223333:role/NodeRole", typ: "EC2_LINUX", canonical: "arn:aws-us-gov:iam::111122223333:role/NodeRole"},
		{arn: "arn:aws:iam::111122223333:user/alice", want: "want an IAM role ARN"},
		{arn: "arn:aws:sts::111122223333:assumed-role/NodeRole/i-0abc", want: "want an IAM role ARN"},
		{arn: "arn:aws:iam::1111:role/NodeRole", want: "want an IAM role ARN"},
		{arn: "", want: "spec.principalARN"},
		{arn: "arn:aws:iam::111122223333:role/NodeRole", typ: "STANDARD", canonical: "arn:aws:iam::111122223333:role/NodeRole"},
		{arn: "arn:aws:iam::111122223333:user/ops/alice", typ: "STANDARD", canonical: "arn:aws:iam::111122223333:user/alice"},
		{arn: "arn:aws:sts::111122223333:assumed-role/Admin/s", typ: "STANDARD", want: "want an IAM user or role ARN"},
		{arn: "arn:aws:iam::111122223333:role/NodeRole", typ: "FARGATE_LINUX", want: "supported values"},
	} {
		e := &NodeAccessEntry{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: NodeAccessEntrySpec{PrincipalARN: tc.arn, Type: AccessEntryType(tc.typ)}}
		got, err := e.CanonicalRoleARN()
		if tc.want == "" {
			if err != nil || got != tc.canonical {
				t.Errorf("%s %s: %q, %v; want %q", tc.arn, tc.typ, got, err, tc.canonical)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: %v, want an error containing %q", tc.arn, tc.typ, err, tc.want)
		}
	}
}

// The CRD's schema pattern and enum must admit exactly what Validate admits.
func TestCRDMatchesValidation(t *testing.T) {
	var crd struct {
		Spec struct {
			Names    struct{ Kind, Plural string }
			Versions []struct {
				Name   string
				Schema struct {
					OpenAPIV3Schema struct {
						Properties struct {
							Spec struct {
								Properties struct {
									PrincipalARN struct{ Pattern string } `json:"principalARN"`
									Type         struct{ Enum []string }
								}
							}
						}
					} `json:"openAPIV3Schema"`
				}
			}
		}
	}
	if err := sigsyaml.Unmarshal(NodeAccessEntryCRD, &crd); err != nil {
		t.Fatal(err)
	}
	if crd.Spec.Names.Kind != NodeAccessEntryKind || crd.Spec.Names.Plural != NodeAccessEntryResource.Resource || crd.Spec.Versions[0].Name != Version {
		t.Fatalf("CRD names %+v, version %s", crd.Spec.Names, crd.Spec.Versions[0].Name)
	}
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties.Spec.Properties
	if spec.PrincipalARN.Pattern != principalARNRE.String() {
		t.Errorf("CRD pattern %q differs from Validate's %q", spec.PrincipalARN.Pattern, principalARNRE.String())
	}
	if strings.Join(spec.Type.Enum, ",") != "EC2_LINUX,EC2_WINDOWS,STANDARD" {
		t.Errorf("CRD type enum %v", spec.Type.Enum)
	}
}
