package userdata

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodejoin/nodejoin/api/nodeconfig/v1alpha1"
	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

// Level ranks a finding.
type Level string

// Finding levels.
const (
	// LevelInfo records how a part or value was translated.
	LevelInfo Level = "info"
	// LevelIgnored records input that has no effect on nodejoin, with the reason.
	LevelIgnored Level = "ignored"
	// LevelWarning records input that was accepted although it is malformed or risky.
	LevelWarning Level = "warning"
)

// Finding is something worth telling the user about one part of the user data.
type Finding struct {
	Part  string `json:"part"`
	Level Level  `json:"level"`
	Msg   string `json:"message"`
}

func (f Finding) String() string { return fmt.Sprintf("%s: %s: %s", f.Part, f.Level, f.Msg) }

// Config is a NodeConfig document and where it came from.
type Config struct {
	Source string
	Kind   Kind
	Config *v1alpha1.NodeConfig
}

// Result is translated user data.
type Result struct {
	Document *Document
	// Configs are the NodeConfig documents, in the order the parts came.
	Configs  []Config
	Findings []Finding
	// BootstrapToken is the token of a NodeJoinConfig part, if any. It is a secret:
	// never print it.
	BootstrapToken string
	// Signal is the user data's cfn-signal call, if a shell part has one: nodeadm then
	// signals the stack once the node is Ready. Only the first part's call counts.
	Signal *Signal
}

// ClusterInfo is what EKS DescribeCluster says about a cluster.
type ClusterInfo struct {
	Endpoint        string
	CertificateData []byte // PEM
	ServiceIPv4CIDR string
	ServiceIPv6CIDR string
	IPFamily        string
	ID              string
	Outpost         bool
}

// Resolver answers what AL2-style user data leaves out.
type Resolver interface {
	// DescribeCluster returns the cluster's endpoint, CA and service CIDR.
	DescribeCluster(ctx context.Context, name string, retries int) (*ClusterInfo, error)
	// VPCIPv4CIDRs returns the IPv4 CIDR blocks of the instance's VPC.
	VPCIPv4CIDRs(ctx context.Context) ([]string, error)
}

// ErrNoResolver reports user data that needs a Resolver when none was given.
var ErrNoResolver = errors.New("no cloud access to look it up")

// Decode splits user data into parts and translates them; see Split and Translate.
func Decode(ctx context.Context, data []byte, r Resolver) (*Result, error) {
	doc, err := Split(data)
	if err != nil {
		return nil, err
	}
	return Translate(ctx, doc, r)
}

// Translate turns every part of doc that configures a node into a NodeConfig document,
// and records a finding for everything else. r may be nil; user data that needs it
// (a bootstrap.sh call with only a cluster name) then fails with ErrNoResolver.
func Translate(ctx context.Context, doc *Document, r Resolver) (*Result, error) {
	res := &Result{Document: doc}
	source := doc.Source
	if source == "" {
		source = "user data"
	}
	for _, n := range doc.Notes {
		res.Findings = append(res.Findings, Finding{Part: source, Level: LevelWarning, Msg: n})
	}
	for i := range doc.Parts {
		p := &doc.Parts[i]
		name := p.Name()
		for _, n := range p.Notes {
			res.Findings = append(res.Findings, Finding{Part: name, Level: LevelWarning, Msg: n})
		}
		var (
			cfgs     []*v1alpha1.NodeConfig
			findings []Finding
			err      error
		)
		switch p.Kind {
		case KindNodeConfig:
			var c *v1alpha1.NodeConfig
			c, err = v1alpha1.Decode(p.Body, name)
			cfgs = []*v1alpha1.NodeConfig{c}
		case KindShell:
			var sig *Signal
			cfgs, findings, sig, err = translateShell(ctx, p, r)
			findings = append(findings, res.addSignal(sig)...)
		case KindCloudConfig:
			cfgs, findings, err = translateCloudConfig(ctx, p, r)
		case KindPowerShell:
			cfgs, findings, err = translatePowerShell(ctx, p, r)
		case KindBottlerocket:
			var token string
			if cfgs, findings, token, err = translateBottlerocket(ctx, p, r); token != "" {
				res.BootstrapToken = token
			}
		case KindNodeJoin:
			var nj *nodejoinv1alpha1.NodeJoinConfig
			if nj, err = nodejoinv1alpha1.DecodeNodeJoinConfig(p.Body, name); err == nil && nj.Spec.BootstrapToken != "" {
				res.BootstrapToken = nj.Spec.BootstrapToken
				findings = []Finding{{Part: name, Level: LevelInfo, Msg: "NodeJoinConfig: the kubelet joins with a bootstrap token (not shown)"}}
			}
		case KindEmpty:
			findings = []Finding{{Part: name, Level: LevelIgnored, Msg: "empty"}}
		default:
			ct := p.ContentType
			if ct == "" {
				ct = "no content type"
			}
			findings = []Finding{{Part: name, Level: LevelIgnored, Msg: fmt.Sprintf("%s (%s): nodeadm neither runs nor interprets it", p.Kind, ct)}}
		}
		if err != nil {
			return nil, err
		}
		res.Findings = append(res.Findings, findings...)
		for _, c := range cfgs {
			if c != nil {
				res.Configs = append(res.Configs, Config{Source: name, Kind: p.Kind, Config: c})
			}
		}
	}
	return res, nil
}

// addSignal keeps the first part's cfn-signal call: a node signals once per boot.
func (res *Result) addSignal(sig *Signal) []Finding {
	switch {
	case sig == nil:
		return nil
	case res.Signal == nil:
		res.Signal = sig
		return nil
	}
	return []Finding{{Part: sig.Part, Level: LevelWarning, Msg: fmt.Sprintf("line %d: cfn-signal call ignored: %s already has one (line %d), and a node signals once per boot", sig.Line, res.Signal.Part, res.Signal.Line)}}
}

func newNodeConfig() *v1alpha1.NodeConfig {
	return &v1alpha1.NodeConfig{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: v1alpha1.Kind}}
}

// setKubeletConfig sets one key of spec.kubelet.config.
func setKubeletConfig(c *v1alpha1.NodeConfig, key string, value any) error {
	raw, err := json.Marshal(value)
	if err != nil {
		return fmt.Errorf("encoding kubelet config %s: %w", key, err)
	}
	if c.Spec.Kubelet.Config == nil {
		c.Spec.Kubelet.Config = v1alpha1.InlineDocument{}
	}
	c.Spec.Kubelet.Config[key] = raw
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
