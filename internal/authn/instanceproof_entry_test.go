package authn

import (
	"testing"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

// An entry annotated nodejoin.io/instance-proof requires its nodes' proof unless the
// value is "optional": a misspelt value does not lift the requirement.
func TestEntryRequiresInstanceProof(t *testing.T) {
	for value, want := range map[string]bool{"": false, "optional": false, "required": true, "Required": true, "yes": true} {
		e := entry("nodes", "arn:aws:iam::111122223333:role/nodes")
		if value != "" {
			e.Annotations = map[string]string{nodejoinv1alpha1.InstanceProofAnnotation: value}
		}
		m := EntryMappings([]*nodejoinv1alpha1.NodeAccessEntry{e}, nil)
		if len(m) != 1 || m[0].RequireInstanceProof != want {
			t.Errorf("annotation %q: mappings %+v, want RequireInstanceProof %v", value, m, want)
		}
	}
}
