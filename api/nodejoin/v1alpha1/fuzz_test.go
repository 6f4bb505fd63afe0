package v1alpha1

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsyaml "sigs.k8s.io/yaml"
)

// FuzzNodeAccessEntry: any YAML or JSON of an entry, decoded strictly; one that Validate
// accepts re-encodes to the same entry, its canonical ARN is an IAM role ARN (or, for a
// STANDARD entry, a role or user ARN) without a path, of the same partition, account and
// name; a node entry maps to the node identity only (NodeUsernameTemplate, NodeGroups)
// and has no policy groups; a STANDARD entry's groups have no reserved prefix. One
// Validate refuses has no canonical ARN.
func FuzzNodeAccessEntry(f *testing.F) {
	for _, seed := range []string{
		"apiVersion: nodejoin.io/v1alpha1\nkind: NodeAccessEntry\nmetadata:\n  name: workers\nspec:\n  principalARN: arn:aws:iam::111122223333:role/NodeRole\n  type: EC2_LINUX\n",
		`{"apiVersion":"nodejoin.io/v1alpha1","kind":"NodeAccessEntry","metadata":{"name":"win"},"spec":{"principalARN":"arn:aws-cn:iam::111122223333:role/eks/nodes/Win","type":"EC2_WINDOWS"}}`,
		"spec:\n  principalARN: arn:aws:iam::111122223333:user/alice\n",
		"spec:\n  principalARN: arn:aws:iam::111122223333:role/NodeRole\n  type: STANDARD\n  username: admin\n",
		"spec:\n  principalARN: arn:aws:iam::111122223333:user/ops/alice\n  type: STANDARD\n  kubernetesGroups: [devs, system:masters]\n",
		"spec:\n  principalARN: arn:aws:iam::111122223333:user/alice\n  type: STANDARD\n  accessPolicies:\n  - policyARN: arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy\n    accessScope: {type: namespace, namespaces: [dev]}\n",
	} {
		f.Add([]byte(seed))
	}
	canonicalRE := regexp.MustCompile(`^arn:aws(-[a-z]+)*:iam::[0-9]{12}:(role|user)/[\w+=,.@-]{1,64}$`)
	f.Fuzz(func(t *testing.T, data []byte) {
		var e NodeAccessEntry
		if err := sigsyaml.UnmarshalStrict(data, &e); err != nil {
			return
		}
		arn, err := e.CanonicalRoleARN()
		if len(e.Validate()) > 0 {
			if err == nil {
				t.Fatalf("invalid entry %+v has canonical ARN %s", e.Spec, arn)
			}
			return
		}
		if err != nil {
			t.Fatalf("valid entry %+v: %v", e.Spec, err)
		}
		if !canonicalRE.MatchString(arn) || (e.Spec.Type != AccessEntryStandard && !strings.Contains(arn, ":role/")) {
			t.Fatalf("canonical ARN %q of %q (%s) is not a principal ARN without a path", arn, e.Spec.PrincipalARN, e.Spec.Type)
		}
		kind := ":role/"
		if strings.Contains(arn, ":user/") {
			kind = ":user/"
		}
		prefix, _, _ := strings.Cut(e.Spec.PrincipalARN, kind)
		name := e.Spec.PrincipalARN[strings.LastIndex(e.Spec.PrincipalARN, "/")+1:]
		if arn != prefix+kind+name {
			t.Fatalf("canonical ARN %q changes the partition, account or name of %q", arn, e.Spec.PrincipalARN)
		}
		if e.Spec.Type != AccessEntryStandard && (len(e.PolicyGroups()) > 0 || len(e.Spec.KubernetesGroups) > 0 || e.Spec.Username != "") {
			t.Fatalf("node entry %+v grants more than the node identity", e.Spec)
		}
		for _, g := range e.Spec.KubernetesGroups {
			if ReservedPrefix(g) != "" {
				t.Fatalf("valid entry grants reserved group %q", g)
			}
		}
		if NodeUsernameTemplate != "system:node:{{EC2PrivateDNSName}}" || !reflect.DeepEqual(NodeGroups, []string{"system:bootstrappers", "system:nodes"}) {
			t.Fatalf("entries map to %s %v", NodeUsernameTemplate, NodeGroups)
		}
		// metav1.Time encodes whole seconds: compare what survives encoding.
		for i := range e.Spec.AccessPolicies {
			a := &e.Spec.AccessPolicies[i]
			a.AssociatedAt, a.ModifiedAt = metav1.NewTime(a.AssociatedAt.Truncate(time.Second)), metav1.NewTime(a.ModifiedAt.Truncate(time.Second))
		}
		out, err := json.Marshal(&e)
		if err != nil {
			t.Fatal(err)
		}
		// An empty list and no list encode alike (omitempty): compare them as equal.
		if len(e.Spec.KubernetesGroups) == 0 {
			e.Spec.KubernetesGroups = nil
		}
		if len(e.Spec.AccessPolicies) == 0 {
			e.Spec.AccessPolicies = nil
		}
		var back NodeAccessEntry
		if err := sigsyaml.UnmarshalStrict(out, &back); err != nil || !reflect.DeepEqual(back, e) {
			t.Fatalf("re-encoded %s decodes to %+v (%v), want %+v", out, back, err, e)
		}
	})
}
