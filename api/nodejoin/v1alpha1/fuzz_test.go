package v1alpha1

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"
)

// FuzzNodeAccessEntry: any YAML or JSON of an entry, decoded strictly; one that Validate
// accepts re-encodes to the same entry, its canonical ARN is an IAM role ARN without a
// path, of the same partition, account and role name, and it maps to the node identity
// only (NodeUsernameTemplate, NodeGroups). One Validate refuses has no canonical ARN.
func FuzzNodeAccessEntry(f *testing.F) {
	for _, seed := range []string{
		"apiVersion: nodejoin.io/v1alpha1\nkind: NodeAccessEntry\nmetadata:\n  name: workers\nspec:\n  principalARN: arn:aws:iam::111122223333:role/NodeRole\n  type: EC2_LINUX\n",
		`{"apiVersion":"nodejoin.io/v1alpha1","kind":"NodeAccessEntry","metadata":{"name":"win"},"spec":{"principalARN":"arn:aws-cn:iam::111122223333:role/eks/nodes/Win","type":"EC2_WINDOWS"}}`,
		"spec:\n  principalARN: arn:aws:iam::111122223333:user/alice\n",
		"spec:\n  principalARN: arn:aws:iam::111122223333:role/NodeRole\n  type: STANDARD\n  username: admin\n",
	} {
		f.Add([]byte(seed))
	}
	canonicalRE := regexp.MustCompile(`^arn:aws(-[a-z]+)*:iam::[0-9]{12}:role/[\w+=,.@-]{1,64}$`)
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
		if !canonicalRE.MatchString(arn) {
			t.Fatalf("canonical ARN %q of %q is not a role ARN without a path", arn, e.Spec.PrincipalARN)
		}
		prefix, _, _ := strings.Cut(e.Spec.PrincipalARN, ":role/")
		name := e.Spec.PrincipalARN[strings.LastIndex(e.Spec.PrincipalARN, "/")+1:]
		if arn != prefix+":role/"+name {
			t.Fatalf("canonical ARN %q changes the partition, account or name of %q", arn, e.Spec.PrincipalARN)
		}
		if NodeUsernameTemplate != "system:node:{{EC2PrivateDNSName}}" || !reflect.DeepEqual(NodeGroups, []string{"system:bootstrappers", "system:nodes"}) {
			t.Fatalf("entries map to %s %v", NodeUsernameTemplate, NodeGroups)
		}
		out, err := json.Marshal(&e)
		if err != nil {
			t.Fatal(err)
		}
		var back NodeAccessEntry
		if err := sigsyaml.UnmarshalStrict(out, &back); err != nil || !reflect.DeepEqual(back, e) {
			t.Fatalf("re-encoded %s decodes to %+v (%v), want %+v", out, back, err, e)
		}
	})
}
