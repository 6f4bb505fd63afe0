package v1alpha1

import (
	"strings"
	"testing"
)

func TestDecodeNodeJoinConfig(t *testing.T) {
	good := "apiVersion: nodejoin.io/v1alpha1\nkind: NodeJoinConfig\nspec:\n  bootstrapToken: abcdef.0123456789abcdef\n"
	c, err := DecodeNodeJoinConfig([]byte(good), "part 2")
	if err != nil || c.Spec.BootstrapToken != "abcdef.0123456789abcdef" {
		t.Fatalf("%+v, %v", c, err)
	}
	for doc, want := range map[string]string{
		strings.Replace(good, "abcdef.0123456789abcdef", "ABCDEF.0123456789abcdef", 1): "is not a bootstrap token",
		strings.Replace(good, "bootstrapToken", "bootstrapTokn", 1):                    `part 2, line 4: field spec.bootstrapTokn: unknown field (did you mean "bootstrapToken"?)`,
		strings.Replace(good, "NodeJoinConfig", "NodeConfig", 1):                       "not a NodeJoinConfig: kind \"NodeConfig\" of apiVersion \"nodejoin.io/v1alpha1\" (want apiVersion: nodejoin.io/v1alpha1, kind: NodeJoinConfig)",
	} {
		_, err := DecodeNodeJoinConfig([]byte(doc), "part 2")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error = %v, want %q", err, want)
		}
		if err != nil && strings.Contains(err.Error(), "0123456789abcdef") {
			t.Errorf("error quotes the token: %v", err)
		}
	}
}

func FuzzDecodeNodeJoinConfig(f *testing.F) {
	f.Add([]byte("apiVersion: nodejoin.io/v1alpha1\nkind: NodeJoinConfig\nspec:\n  bootstrapToken: abcdef.0123456789abcdef\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeNodeJoinConfig(data, "fuzz")
		if err == nil && c.Spec.BootstrapToken != "" && !bootstrapTokenRE.MatchString(c.Spec.BootstrapToken) {
			t.Fatalf("accepted malformed token %q", c.Spec.BootstrapToken)
		}
	})
}
