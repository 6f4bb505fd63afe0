// Package v1alpha1 is nodejoin's own API group, nodejoin.io/v1alpha1.
//
// NodeJoinConfig carries what a node needs from nodejoin beyond the upstream
// NodeConfig: today, a bootstrap token. It travels in user data as a MIME part of
// its own media type, application/nodejoin.io, next to the application/node.eks.aws
// parts. Upstream nodeadm reads only parts of its own media type, so the same user
// data still decodes there; nodejoin's nodeadm reads both.
package v1alpha1

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsyaml "sigs.k8s.io/yaml"
)

// Group, version and kind.
const (
	GroupName  = "nodejoin.io"
	Version    = "v1alpha1"
	APIVersion = GroupName + "/" + Version
	// NodeJoinConfigKind is the kind of NodeJoinConfig.
	NodeJoinConfigKind = "NodeJoinConfig"
	// MediaType is the MIME type of a user-data part holding a NodeJoinConfig.
	MediaType = "application/" + GroupName
)

// NodeJoinConfig is nodejoin's addition to a node's user data.
type NodeJoinConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              NodeJoinConfigSpec `json:"spec"`
}

// NodeJoinConfigSpec is what the node uses.
type NodeJoinConfigSpec struct {
	// BootstrapToken, "<id>.<secret>", makes the kubelet join with a bootstrap token
	// (TLS bootstrapping) instead of an AWS-style identity token.
	BootstrapToken string `json:"bootstrapToken,omitempty"`
}

var bootstrapTokenRE = regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}$`)

// ValidBootstrapToken reports whether s has a bootstrap token's form, <id>.<secret>.
func ValidBootstrapToken(s string) bool { return bootstrapTokenRE.MatchString(s) }

// DecodeNodeJoinConfig parses a NodeJoinConfig strictly and checks it. Errors never
// quote the token.
func DecodeNodeJoinConfig(data []byte, source string) (*NodeJoinConfig, error) {
	js, err := sigsyaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	var c NodeJoinConfig
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%s: NodeJoinConfig: %w", source, err)
	}
	if c.APIVersion != APIVersion || c.Kind != NodeJoinConfigKind {
		return nil, fmt.Errorf("%s: want apiVersion %s, kind %s; got %q, %q", source, APIVersion, NodeJoinConfigKind, c.APIVersion, c.Kind)
	}
	if t := c.Spec.BootstrapToken; t != "" && !bootstrapTokenRE.MatchString(t) {
		return nil, fmt.Errorf("%s: spec.bootstrapToken is not a bootstrap token (want 6 then 16 characters of [a-z0-9], joined by '.')", source)
	}
	return &c, nil
}
