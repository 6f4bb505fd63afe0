package userdata

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

// BottlerocketKubelet maps the kubelet configuration fields Bottlerocket has a setting
// for to that setting under settings.kubernetes. Other fields cannot be expressed in
// Bottlerocket user data.
var BottlerocketKubelet = map[string]string{
	"clusterDNS":                      "cluster-dns-ip",
	"maxPods":                         "max-pods",
	"kubeReserved":                    "kube-reserved",
	"systemReserved":                  "system-reserved",
	"evictionHard":                    "eviction-hard",
	"evictionSoft":                    "eviction-soft",
	"evictionSoftGracePeriod":         "eviction-soft-grace-period",
	"evictionMaxPodGracePeriod":       "eviction-max-pod-grace-period",
	"imageGCHighThresholdPercent":     "image-gc-high-threshold-percent",
	"imageGCLowThresholdPercent":      "image-gc-low-threshold-percent",
	"cpuCFSQuota":                     "cpu-cfs-quota-enforced",
	"podPidsLimit":                    "pod-pids-limit",
	"shutdownGracePeriod":             "shutdown-grace-period",
	"shutdownGracePeriodCriticalPods": "shutdown-grace-period-for-critical-pods",
	"kubeAPIQPS":                      "kube-api-qps",
	"kubeAPIBurst":                    "kube-api-burst",
	"containerLogMaxSize":             "container-log-max-size",
	"containerLogMaxFiles":            "container-log-max-files",
	"cpuManagerPolicy":                "cpu-manager-policy",
	"topologyManagerPolicy":           "topology-manager-policy",
}

// commented is a TOML entry written as a comment: eksctl leaves the admin container's
// setting commented out when the group does not choose.
type commented struct{ comment, line string }

// The comments eksctl writes above the cluster settings.
var bottlerocketComments = map[string]string{
	"settings.kubernetes.api-server":          "Kubernetes Control Plane API Endpoint",
	"settings.kubernetes.cluster-certificate": "Kubernetes Cluster CA Certificate",
	"settings.kubernetes.cluster-name":        "Kubernetes Cluster Name",
}

// adminComment heads the admin container's setting when eksctl leaves it commented out.
const adminComment = "Bottlerocket Admin Container"

// bottlerocket is Bottlerocket's TOML settings. Managed: EKS's settings with the user's
// TOML merged over them (the user's values win, as EKS documents). Self-managed
// (eksctl): the user's settings with the cluster settings over them; labels, taints
// and max pods come from the group, never from the user's settings.
//
//nolint:gocyclo // one optional setting after another, in document order.
func (r *renderer) bottlerocket() ([]byte, error) {
	where := "node group " + r.t.NodeGroupName
	if len(r.t.PreBootstrapCommands) > 0 {
		return nil, fmt.Errorf("%s: preBootstrapCommands are not supported for %s (it runs no shell at boot); use settings.bootstrap-commands in user data", where, v1alpha1.AMIFamilyBottlerocket)
	}
	user := map[string]any{}
	if strings.TrimSpace(r.t.UserData) != "" {
		if err := toml.Unmarshal([]byte(strings.ReplaceAll(r.t.UserData, "\r\n", "\n")), &user); err != nil {
			return nil, fmt.Errorf("%s: user data for %s must be TOML: %w", where, v1alpha1.AMIFamilyBottlerocket, err)
		}
	}
	kube := map[string]any{
		"cluster-name":        r.c.Name,
		"api-server":          r.c.Endpoint,
		"cluster-certificate": r.caB64,
	}
	if len(r.labels) > 0 {
		kube["node-labels"] = stringMapAny(r.labels)
	}
	if r.dns != "" {
		kube["cluster-dns-ip"] = r.dns
	}
	if len(r.t.Taints) > 0 {
		taints := map[string]any{}
		for _, t := range r.t.Taints {
			v := t.Value + ":" + string(t.Effect)
			switch prev := taints[t.Key].(type) {
			case nil:
				taints[t.Key] = v
			case string:
				taints[t.Key] = []any{prev, v}
			case []any:
				taints[t.Key] = append(prev, v)
			}
		}
		kube["node-taints"] = taints
	}
	maxPods := r.maxPods
	if r.t.Style == Managed {
		maxPods = r.managedMaxPods()
	}
	if maxPods > 0 {
		kube["max-pods"] = int64(maxPods)
	}
	for _, k := range sortedKeys(r.t.Kubelet) {
		setting, ok := BottlerocketKubelet[k]
		if !ok {
			return nil, fmt.Errorf("%s: kubelet.%s has no Bottlerocket setting; %s takes %s", where, k, v1alpha1.AMIFamilyBottlerocket, strings.Join(sortedKeys(BottlerocketKubelet), ", "))
		}
		v, err := bottlerocketValue(r.t.Kubelet[k])
		if err != nil {
			return nil, fmt.Errorf("%s: kubelet.%s: %w", where, k, err)
		}
		if list, ok := v.([]any); ok && k == "clusterDNS" && len(list) == 1 {
			v = list[0]
		}
		kube[setting] = v
	}
	if r.c.BootstrapToken != "" {
		kube["bootstrap-token"] = r.c.BootstrapToken
	}
	generated := map[string]any{"settings": map[string]any{"kubernetes": kube}}

	var merged map[string]any
	comments := map[string]string{}
	if r.t.Style == Managed {
		merged = mergeTOMLMaps(generated, user)
	} else {
		if uk, ok := lookup(user, "settings", "kubernetes"); ok {
			for _, k := range []string{"node-labels", "node-taints", "max-pods"} {
				if _, set := uk[k]; set {
					return nil, fmt.Errorf("%s: user data sets settings.kubernetes.%s; set the node group's labels, taints or maxPods instead", where, k)
				}
			}
		}
		merged = mergeTOMLMaps(user, generated)
		if admin, ok := lookup(merged, "settings", "host-containers", "admin"); !ok || admin["enabled"] == nil {
			settings := merged["settings"].(map[string]any)
			hc, _ := settings["host-containers"].(map[string]any)
			if hc == nil {
				hc = map[string]any{}
				settings["host-containers"] = hc
			}
			a, _ := hc["admin"].(map[string]any)
			if a == nil {
				a = map[string]any{}
				hc["admin"] = a
			}
			a["enabled"] = commented{comment: adminComment, line: "enabled = false"}
		}
		comments = bottlerocketComments
	}
	var b strings.Builder
	if err := writeTOMLTable(&b, nil, merged, comments); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return []byte(b.String()), nil
}

// bottlerocketValue converts a kubelet configuration value (decoded JSON or YAML) to
// the TOML type Bottlerocket takes: whole numbers become integers.
func bottlerocketValue(v any) (any, error) {
	switch x := v.(type) {
	case string, bool, int64:
		return x, nil
	case int:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case float64:
		if x == float64(int64(x)) {
			return int64(x), nil
		}
		return x, nil
	case []string:
		out := make([]any, len(x))
		for i, s := range x {
			out[i] = s
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			c, err := bottlerocketValue(e)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case map[string]string:
		return stringMapAny(x), nil
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			c, err := bottlerocketValue(e)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	}
	return nil, fmt.Errorf("value %v (%T) has no TOML form", v, v)
}

func stringMapAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func lookup(m map[string]any, path ...string) (map[string]any, bool) {
	for _, p := range path {
		next, ok := m[p].(map[string]any)
		if !ok {
			return nil, false
		}
		m = next
	}
	return m, true
}

// mergeTOMLMaps merges src over dst into a new map: tables merge key by key, any other
// value of src replaces dst's.
func mergeTOMLMaps(dst, src map[string]any) map[string]any {
	out := make(map[string]any, len(dst))
	for k, v := range dst {
		out[k] = v
	}
	for k, v := range src {
		sm, sok := v.(map[string]any)
		dm, dok := out[k].(map[string]any)
		if sok && dok {
			out[k] = mergeTOMLMaps(dm, sm)
			continue
		}
		out[k] = v
	}
	return out
}

var bareKeyRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func tomlKey(k string) string {
	if bareKeyRE.MatchString(k) {
		return k
	}
	return tomlString(k)
}

// tomlString writes a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range s {
		switch {
		case c == '"':
			b.WriteString(`\"`)
		case c == '\\':
			b.WriteString(`\\`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\t':
			b.WriteString(`\t`)
		case c == '\r':
			b.WriteString(`\r`)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, c)
		default:
			b.WriteRune(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// writeTOMLTable writes table m at path as go-toml v1 lays tables out (eksctl's
// encoder): a blank line and an indented header per table, values before sub-tables,
// keys sorted, two spaces of indent per level.
func writeTOMLTable(b *strings.Builder, path []string, m map[string]any, comments map[string]string) error {
	depth := len(path)
	if depth > 0 {
		quoted := make([]string, depth)
		for i, p := range path {
			quoted[i] = tomlKey(p)
		}
		fmt.Fprintf(b, "\n%s[%s]\n", strings.Repeat("  ", depth-1), strings.Join(quoted, "."))
	}
	indent := strings.Repeat("  ", depth)
	keys := sortedKeys(m)
	var tables []string
	for _, k := range keys {
		v := m[k]
		if _, ok := v.(map[string]any); ok {
			tables = append(tables, k)
			continue
		}
		full := strings.Join(append(slices.Clone(path), k), ".")
		if c := comments[full]; c != "" {
			fmt.Fprintf(b, "\n%s# %s\n", indent, c)
		}
		if cm, ok := v.(commented); ok {
			fmt.Fprintf(b, "\n%s# %s\n%s# %s\n", indent, cm.comment, indent, cm.line)
			continue
		}
		s, err := tomlValue(v)
		if err != nil {
			return fmt.Errorf("TOML %s: %w", full, err)
		}
		fmt.Fprintf(b, "%s%s = %s\n", indent, tomlKey(k), s)
	}
	for _, k := range tables {
		if err := writeTOMLTable(b, append(slices.Clone(path), k), m[k].(map[string]any), comments); err != nil {
			return err
		}
	}
	return nil
}

// tomlValue renders a value inline: strings, numbers, booleans, dates, arrays, and
// inline tables inside arrays.
func tomlValue(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return tomlString(x), nil
	case []any:
		out := make([]string, len(x))
		for i, e := range x {
			s, err := tomlValue(e)
			if err != nil {
				return "", err
			}
			out[i] = s
		}
		return "[" + strings.Join(out, ", ") + "]", nil
	case map[string]any:
		var out []string
		for _, k := range sortedKeys(x) {
			s, err := tomlValue(x[k])
			if err != nil {
				return "", err
			}
			out = append(out, tomlKey(k)+" = "+s)
		}
		return "{" + strings.Join(out, ", ") + "}", nil
	}
	// Numbers, booleans and dates: go-toml's own encoding of the one value.
	enc, err := toml.Marshal(map[string]any{"v": v})
	if err != nil {
		return "", err
	}
	s := strings.TrimSpace(string(enc))
	if !strings.HasPrefix(s, "v = ") {
		return "", fmt.Errorf("value %v (%T) has no inline TOML form", v, v)
	}
	return strings.TrimPrefix(s, "v = "), nil
}
