package userdata

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"github.com/nodejoin/nodejoin/api/nodeconfig/v1alpha1"
	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

// taint is one entry of the kubelet's registerWithTaints.
type taint struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
}

// translateBottlerocket reads Bottlerocket's settings.kubernetes table. The settings a
// NodeConfig can express are translated; every other setting is listed as ignored.
func translateBottlerocket(ctx context.Context, p *Part, r Resolver) ([]*v1alpha1.NodeConfig, []Finding, string, error) {
	name := p.Name()
	var doc map[string]any
	if err := toml.Unmarshal(bytes.ReplaceAll(p.Body, []byte("\r\n"), []byte("\n")), &doc); err != nil {
		var derr *toml.DecodeError
		if errors.As(err, &derr) {
			row, col := derr.Position()
			return nil, nil, "", fmt.Errorf("%s, line %d, column %d: TOML syntax error: %s", name, row, col, derr.Error())
		}
		return nil, nil, "", fmt.Errorf("%s: TOML: %w", name, err)
	}
	var findings []Finding
	ignore := func(format string, args ...any) {
		findings = append(findings, Finding{Part: name, Level: LevelIgnored, Msg: fmt.Sprintf(format, args...)})
	}
	settings, _ := doc["settings"].(map[string]any)
	for _, k := range sortedKeys(doc) {
		if k != "settings" {
			ignore("top-level key %q: Bottlerocket reads only settings", k)
		}
	}
	kube, _ := settings["kubernetes"].(map[string]any)
	for _, k := range sortedKeys(settings) {
		if k != "kubernetes" {
			ignore("settings.%s: a Bottlerocket host setting with no NodeConfig equivalent", k)
		}
	}
	if kube == nil {
		ignore("no settings.kubernetes table: configures no node")
		return nil, findings, "", nil
	}
	params, taints, err := bottlerocketParams(kube, name)
	if err != nil {
		return nil, nil, "", err
	}
	token, err := bottlerocketToken(kube, name)
	if err != nil {
		return nil, nil, "", err
	}
	if token != "" {
		findings = append(findings, Finding{Part: name, Level: LevelInfo, Msg: "settings.kubernetes.bootstrap-token: the kubelet joins with a bootstrap token (not shown)"})
	}
	handled := map[string]bool{"bootstrap-token": true, "cluster-name": true, "api-server": true, "cluster-certificate": true, "cluster-dns-ip": true, "max-pods": true, "node-labels": true, "node-taints": true}
	for k := range bottlerocketKubelet {
		handled[k] = true
	}
	for _, k := range sortedKeys(kube) {
		if !handled[k] {
			ignore("settings.kubernetes.%s: not translated; set the equivalent in spec.kubelet.config if you need it", k)
		}
	}
	cfg, more, err := params.build(ctx, r)
	if err != nil {
		return nil, nil, "", err
	}
	if err := bottlerocketKubeletConfig(cfg, kube, name); err != nil {
		return nil, nil, "", err
	}
	if params.maxPods > 0 {
		// Bottlerocket sizes kubeReserved memory from settings.kubernetes.max-pods, not
		// from the instance type: make it nodeadm's own max pods, from which nodeadm
		// computes kubeReserved.
		cfg.Spec.Kubelet.MaxPodsExpression = strconv.Itoa(params.maxPods)
		findings = append(findings, Finding{Part: name, Level: LevelInfo, Msg: fmt.Sprintf("settings.kubernetes.max-pods %d also sizes kubeReserved memory (%d Mi), as on Bottlerocket", params.maxPods, 11*params.maxPods+255)})
	}
	if len(taints) > 0 {
		if err := setKubeletConfig(cfg, "registerWithTaints", taints); err != nil {
			return nil, nil, "", err
		}
	}
	findings = append([]Finding{{Part: name, Level: LevelInfo, Msg: "Bottlerocket settings.kubernetes translated to a NodeConfig"}}, findings...)
	return []*v1alpha1.NodeConfig{cfg}, append(findings, more...), token, nil
}

// bottlerocketParams reads the settings.kubernetes keys that map onto bootstrap inputs.
func bottlerocketParams(kube map[string]any, name string) (*al2Params, []taint, error) {
	str := func(key string) (string, error) {
		v, ok := kube[key]
		if !ok {
			return "", nil
		}
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("%s: settings.kubernetes.%s: want a string, got %v", name, key, v)
		}
		return s, nil
	}
	params := &al2Params{where: name, retries: 3, caField: "settings.kubernetes.cluster-certificate"}
	var err error
	if params.clusterName, err = str("cluster-name"); err != nil {
		return nil, nil, err
	}
	if params.clusterName == "" {
		return nil, nil, fmt.Errorf("%s: settings.kubernetes.cluster-name is missing", name)
	}
	if params.endpoint, err = str("api-server"); err != nil {
		return nil, nil, err
	}
	if params.b64CA, err = str("cluster-certificate"); err != nil {
		return nil, nil, err
	}
	switch v := kube["cluster-dns-ip"].(type) {
	case nil:
	case string:
		params.dnsClusterIP = v
	case []any:
		var ips []string
		for _, e := range v {
			ips = append(ips, fmt.Sprint(e))
		}
		params.dnsClusterIP = strings.Join(ips, ",")
	default:
		return nil, nil, fmt.Errorf("%s: settings.kubernetes.cluster-dns-ip: want a string or a list, got %v", name, v)
	}
	if v, ok := kube["max-pods"]; ok {
		n, ok := v.(int64)
		if !ok || n <= 0 {
			return nil, nil, fmt.Errorf("%s: settings.kubernetes.max-pods: want a positive integer, got %v", name, v)
		}
		params.maxPods = int(n)
	}
	if labels, ok := kube["node-labels"].(map[string]any); ok && len(labels) > 0 {
		var kv []string
		for _, k := range sortedKeys(labels) {
			kv = append(kv, fmt.Sprintf("%s=%v", k, labels[k]))
		}
		params.kubeletArgs = append(params.kubeletArgs, "--node-labels="+strings.Join(kv, ","))
	}
	taints, err := bottlerocketTaints(kube["node-taints"], name)
	if err != nil {
		return nil, nil, err
	}
	return params, taints, nil
}

// bottlerocketTaints reads node-taints: key = "value:Effect" or key = ["value:Effect", ...].
func bottlerocketTaints(v any, where string) ([]taint, error) {
	if v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: settings.kubernetes.node-taints: want a table, got %v", where, v)
	}
	var out []taint
	for _, key := range sortedKeys(m) {
		var entries []string
		switch e := m[key].(type) {
		case string:
			entries = []string{e}
		case []any:
			for _, x := range e {
				entries = append(entries, fmt.Sprint(x))
			}
		default:
			return nil, fmt.Errorf("%s: settings.kubernetes.node-taints.%s: want \"value:Effect\" or a list of them", where, key)
		}
		for _, entry := range entries {
			value, effect, ok := strings.Cut(entry, ":")
			if !ok {
				value, effect = "", entry
			}
			if effect != "NoSchedule" && effect != "PreferNoSchedule" && effect != "NoExecute" {
				return nil, fmt.Errorf("%s: settings.kubernetes.node-taints.%s: effect %q: want NoSchedule, PreferNoSchedule or NoExecute", where, key, effect)
			}
			out = append(out, taint{Key: key, Value: value, Effect: effect})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// bottlerocketToken reads settings.kubernetes.bootstrap-token. Errors never quote it.
func bottlerocketToken(kube map[string]any, name string) (string, error) {
	v, ok := kube["bootstrap-token"]
	if !ok {
		return "", nil
	}
	s, ok := v.(string)
	if !ok || !nodejoinv1alpha1.ValidBootstrapToken(s) {
		return "", fmt.Errorf("%s: settings.kubernetes.bootstrap-token: want a bootstrap token of the form [a-z0-9]{6}.[a-z0-9]{16}", name)
	}
	return s, nil
}

// bottlerocketKubelet maps settings.kubernetes keys onto the kubelet configuration
// fields they set, with the kind of value each takes.
var bottlerocketKubelet = map[string]struct {
	field string
	kind  string // "map" (of strings), "int", "bool", "string"
}{
	"kube-reserved":                           {"kubeReserved", "map"},
	"system-reserved":                         {"systemReserved", "map"},
	"eviction-hard":                           {"evictionHard", "map"},
	"eviction-soft":                           {"evictionSoft", "map"},
	"eviction-soft-grace-period":              {"evictionSoftGracePeriod", "map"},
	"eviction-max-pod-grace-period":           {"evictionMaxPodGracePeriod", "int"},
	"image-gc-high-threshold-percent":         {"imageGCHighThresholdPercent", "int"},
	"image-gc-low-threshold-percent":          {"imageGCLowThresholdPercent", "int"},
	"cpu-cfs-quota-enforced":                  {"cpuCFSQuota", "bool"},
	"pod-pids-limit":                          {"podPidsLimit", "int"},
	"shutdown-grace-period":                   {"shutdownGracePeriod", "string"},
	"shutdown-grace-period-for-critical-pods": {"shutdownGracePeriodCriticalPods", "string"},
	"kube-api-qps":                            {"kubeAPIQPS", "int"},
	"kube-api-burst":                          {"kubeAPIBurst", "int"},
	"container-log-max-size":                  {"containerLogMaxSize", "string"},
	"container-log-max-files":                 {"containerLogMaxFiles", "int"},
	"cpu-manager-policy":                      {"cpuManagerPolicy", "string"},
	"topology-manager-policy":                 {"topologyManagerPolicy", "string"},
}

// bottlerocketKubeletConfig translates the settings.kubernetes keys that are kubelet
// configuration into spec.kubelet.config.
func bottlerocketKubeletConfig(cfg *v1alpha1.NodeConfig, kube map[string]any, where string) error {
	for _, k := range sortedKeys(kube) {
		m, ok := bottlerocketKubelet[k]
		if !ok {
			continue
		}
		v := kube[k]
		bad := func() error {
			return fmt.Errorf("%s: settings.kubernetes.%s: want a %s, got %v", where, k, map[string]string{"map": "table of strings", "int": "whole number", "bool": "boolean", "string": "string"}[m.kind], v)
		}
		var out any
		switch m.kind {
		case "map":
			t, ok := v.(map[string]any)
			if !ok {
				return bad()
			}
			strs := map[string]string{}
			for tk, tv := range t {
				s, ok := tv.(string)
				if !ok {
					return bad()
				}
				strs[tk] = s
			}
			out = strs
		case "int":
			switch n := v.(type) {
			case int64:
				out = n
			case string: // Bottlerocket also takes numbers as strings
				i, err := strconv.ParseInt(n, 10, 64)
				if err != nil {
					return bad()
				}
				out = i
			default:
				return bad()
			}
		case "bool":
			b, ok := v.(bool)
			if !ok {
				return bad()
			}
			out = b
		default:
			s, ok := v.(string)
			if !ok {
				return bad()
			}
			out = s
		}
		if err := setKubeletConfig(cfg, m.field, out); err != nil {
			return err
		}
	}
	return nil
}
