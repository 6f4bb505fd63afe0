// Package nodeconfig merges NodeConfig documents the way upstream nodeadm does and
// derives the values a node needs that its configuration leaves out: cluster DNS, max
// pods, reserved resources.
package nodeconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/pelletier/go-toml/v2"

	"github.com/nodejoin/nodejoin/api/nodeconfig/v1alpha1"
)

// Merge folds configs left to right into one: later documents win. The rules are
// upstream nodeadm's:
//   - scalars: a later non-empty value wins; an empty one never clears;
//   - certificateAuthority, nameservers, domains, disabledMounts: a later non-empty
//     list replaces;
//   - kubelet.flags: appended;
//   - kubelet.config and containerd.baseRuntimeSpec: deep JSON merge, lists replaced;
//   - containerd.config: deep TOML merge;
//   - featureGates: per gate, a later false wins too;
//   - instance.environment: per service, then per variable.
func Merge(configs []*v1alpha1.NodeConfig) (*v1alpha1.NodeConfig, error) {
	out := &v1alpha1.NodeConfig{}
	out.APIVersion, out.Kind = v1alpha1.APIVersion, v1alpha1.Kind
	for i, c := range configs {
		if err := mergeInto(&out.Spec, &c.Spec); err != nil {
			return nil, fmt.Errorf("merging NodeConfig %d of %d: %w", i+1, len(configs), err)
		}
	}
	return out, nil
}

func mergeInto(dst, src *v1alpha1.NodeConfigSpec) error {
	scalar(&dst.Cluster.Name, src.Cluster.Name)
	scalar(&dst.Cluster.APIServerEndpoint, src.Cluster.APIServerEndpoint)
	scalar(&dst.Cluster.CIDR, src.Cluster.CIDR)
	scalar(&dst.Cluster.ID, src.Cluster.ID)
	if src.Cluster.EnableOutpost != nil {
		v := *src.Cluster.EnableOutpost
		dst.Cluster.EnableOutpost = &v
	}
	list(&dst.Cluster.CertificateAuthority, src.Cluster.CertificateAuthority)

	dst.Kubelet.Flags = append(dst.Kubelet.Flags, src.Kubelet.Flags...)
	scalar(&dst.Kubelet.MaxPodsExpression, src.Kubelet.MaxPodsExpression)
	var err error
	if dst.Kubelet.Config, err = MergeDocuments(dst.Kubelet.Config, src.Kubelet.Config); err != nil {
		return fmt.Errorf("kubelet.config: %w", err)
	}
	if dst.Containerd.BaseRuntimeSpec, err = MergeDocuments(dst.Containerd.BaseRuntimeSpec, src.Containerd.BaseRuntimeSpec); err != nil {
		return fmt.Errorf("containerd.baseRuntimeSpec: %w", err)
	}
	if dst.Containerd.Config, err = MergeTOML(dst.Containerd.Config, src.Containerd.Config); err != nil {
		return fmt.Errorf("containerd.config: %w", err)
	}

	ls := &dst.Instance.LocalStorage
	if src.Instance.LocalStorage.Strategy != "" {
		ls.Strategy = src.Instance.LocalStorage.Strategy
	}
	scalar(&ls.MountPath, src.Instance.LocalStorage.MountPath)
	list(&ls.DisabledMounts, src.Instance.LocalStorage.DisabledMounts)
	list(&dst.Instance.Network.Nameservers, src.Instance.Network.Nameservers)
	list(&dst.Instance.Network.Domains, src.Instance.Network.Domains)
	for svc, vars := range src.Instance.Environment {
		if dst.Instance.Environment == nil {
			dst.Instance.Environment = map[string]map[string]string{}
		}
		if dst.Instance.Environment[svc] == nil {
			dst.Instance.Environment[svc] = map[string]string{}
		}
		maps.Copy(dst.Instance.Environment[svc], vars)
	}
	for gate, on := range src.FeatureGates {
		if dst.FeatureGates == nil {
			dst.FeatureGates = map[v1alpha1.Feature]bool{}
		}
		dst.FeatureGates[gate] = on
	}
	return nil
}

func scalar(dst *string, src string) {
	if src != "" {
		*dst = src
	}
}

func list[T any](dst *[]T, src []T) {
	if len(src) > 0 {
		*dst = append([]T(nil), src...)
	}
}

// MergeDocuments deep-merges src over dst: objects merge per key, anything else
// (lists included) is replaced by src's value.
func MergeDocuments(dst, src v1alpha1.InlineDocument) (v1alpha1.InlineDocument, error) {
	if len(src) == 0 {
		return dst, nil
	}
	out := v1alpha1.InlineDocument{}
	maps.Copy(out, dst)
	for k, sv := range src {
		dv, ok := out[k]
		if !ok {
			out[k] = sv
			continue
		}
		merged, err := mergeJSON(dv, sv)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out[k] = merged
	}
	return out, nil
}

func mergeJSON(dst, src json.RawMessage) (json.RawMessage, error) {
	var d, s any
	if err := decodeJSON(dst, &d); err != nil {
		return nil, err
	}
	if err := decodeJSON(src, &s); err != nil {
		return nil, err
	}
	return json.Marshal(deepMerge(d, s))
}

func decodeJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return dec.Decode(v)
}

// deepMerge merges maps recursively; any other src value replaces dst.
func deepMerge(dst, src any) any {
	dm, ok1 := dst.(map[string]any)
	sm, ok2 := src.(map[string]any)
	if !ok1 || !ok2 {
		return src
	}
	out := make(map[string]any, len(dm)+len(sm))
	maps.Copy(out, dm)
	for k, sv := range sm {
		if dv, ok := out[k]; ok {
			out[k] = deepMerge(dv, sv)
		} else {
			out[k] = sv
		}
	}
	return out
}

// MergeTOML deep-merges the TOML document src over dst, table by table, and returns
// the result re-encoded with sorted keys. An empty side yields the other unchanged.
func MergeTOML(dst, src string) (string, error) {
	if src == "" {
		return dst, nil
	}
	if dst == "" {
		return src, nil
	}
	var d, s map[string]any
	if err := toml.Unmarshal([]byte(dst), &d); err != nil {
		return "", fmt.Errorf("decoding TOML: %w", err)
	}
	if err := toml.Unmarshal([]byte(src), &s); err != nil {
		return "", fmt.Errorf("decoding TOML: %w", err)
	}
	out, err := toml.Marshal(deepMerge(d, s))
	if err != nil {
		return "", fmt.Errorf("encoding TOML: %w", err)
	}
	return string(out), nil
}
