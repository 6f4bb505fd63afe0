package bootstrap

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	cliflag "k8s.io/component-base/cli/flag"
	kubeletapis "k8s.io/kubelet/pkg/apis"

	"github.com/nodejoin/nodejoin/api/nodeconfig/v1alpha1"
)

// Registration is what the kubelet nodeadm configures puts on its Node when it
// registers it: the labels of --node-labels and the taints of --register-with-taints.
type Registration struct {
	Labels map[string]string
	Taints []corev1.Taint
}

// KubeletRegistration reads, from a merged NodeConfig, the labels and taints the
// kubelet registers its Node with, as the kubelet reads them from the command line
// and configuration nodeadm writes (Render): every --node-labels among
// spec.kubelet.flags adds its labels, a later value of a key winning; the last
// --register-with-taints gives the taints, and without one the drop-in's
// registerWithTaints (spec.kubelet.config) does, as a kubelet flag overrides its
// configuration. nodeadm's own flags carry neither. Labels and taints are checked as
// the kubelet checks them before it starts: a kubelet refusing them never registers.
func KubeletRegistration(cfg *v1alpha1.NodeConfig) (*Registration, error) {
	reg := &Registration{Labels: map[string]string{}}
	labels := cliflag.ConfigurationMap(reg.Labels)
	var flagTaints taintsFlag
	fs := pflag.NewFlagSet("kubelet", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.ParseErrorsAllowlist.UnknownFlags = true
	fs.Var(&labels, "node-labels", "")
	fs.Var(&flagTaints, "register-with-taints", "")
	if err := fs.Parse(cfg.Spec.Kubelet.Flags); err != nil {
		return nil, fmt.Errorf("kubelet flags (spec.kubelet.flags): %w", err)
	}
	if err := checkNodeLabels(reg.Labels); err != nil {
		return nil, err
	}
	if flagTaints.set {
		reg.Taints = flagTaints.taints
		return reg, nil
	}
	raw, ok := cfg.Spec.Kubelet.Config["registerWithTaints"]
	if !ok {
		return reg, nil
	}
	if err := json.Unmarshal(raw, &reg.Taints); err != nil {
		return nil, fmt.Errorf("spec.kubelet.config.registerWithTaints: want a list of taints (key, value, effect): %w", err)
	}
	for i, t := range reg.Taints {
		if err := checkTaint(t); err != nil {
			return nil, fmt.Errorf("spec.kubelet.config.registerWithTaints[%d]: %w", i, err)
		}
		if t.TimeAdded != nil {
			return nil, fmt.Errorf("spec.kubelet.config.registerWithTaints[%d]: timeAdded is set by the API server, remove it", i)
		}
	}
	return reg, nil
}

// checkNodeLabels refuses what the kubelet refuses in --node-labels: malformed keys and
// values, and keys under kubernetes.io or k8s.io other than those a kubelet may set.
func checkNodeLabels(labels map[string]string) error {
	var errs []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		v := labels[k]
		if ns, _, found := strings.Cut(k, "/"); found && isKubernetesNamespace(ns) && !kubeletapis.IsKubeletLabel(k) {
			errs = append(errs, fmt.Sprintf("%s: a kubelet may set labels under kubernetes.io and k8s.io only with the prefixes %s or as %s",
				k, strings.Join(kubeletapis.KubeletLabelNamespaces(), ", "), strings.Join(kubeletapis.KubeletLabels(), ", ")))
		}
		if e := validation.IsQualifiedName(k); len(e) > 0 {
			errs = append(errs, fmt.Sprintf("key %q: %s", k, strings.Join(e, "; ")))
		}
		if e := validation.IsValidLabelValue(v); len(e) > 0 {
			errs = append(errs, fmt.Sprintf("%s value %q: %s", k, v, strings.Join(e, "; ")))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("--node-labels: the kubelet refuses %s", strings.Join(errs, "; "))
	}
	return nil
}

func isKubernetesNamespace(ns string) bool {
	for _, d := range []string{"kubernetes.io", "k8s.io"} {
		if ns == d || strings.HasSuffix(ns, "."+d) {
			return true
		}
	}
	return false
}

// taintsFlag is --register-with-taints: a comma-separated list of key[=value]:effect;
// each occurrence replaces the list, an empty one clears it.
type taintsFlag struct {
	taints []corev1.Taint
	set    bool
}

func (f *taintsFlag) String() string {
	s := make([]string, len(f.taints))
	for i, t := range f.taints {
		s[i] = t.ToString()
	}
	return strings.Join(s, ",")
}

func (f *taintsFlag) Type() string { return "taints" }

func (f *taintsFlag) Set(v string) error {
	f.set, f.taints = true, nil
	if v == "" {
		return nil
	}
	for _, spec := range strings.Split(v, ",") {
		t, err := parseTaint(spec)
		if err != nil {
			return err
		}
		if slices.ContainsFunc(f.taints, func(o corev1.Taint) bool { return o.Key == t.Key && o.Effect == t.Effect }) {
			return fmt.Errorf("taint %q: a taint with key %s and effect %s is given twice", spec, t.Key, t.Effect)
		}
		f.taints = append(f.taints, t)
	}
	return nil
}

// parseTaint reads key[=value]:effect, the effect being required at registration.
func parseTaint(spec string) (corev1.Taint, error) {
	kv, effect, found := strings.Cut(spec, ":")
	if !found || strings.Contains(effect, ":") {
		return corev1.Taint{}, fmt.Errorf("taint %q: want key[=value]:effect, such as dedicated=gpu:NoSchedule", spec)
	}
	key, value, hasValue := strings.Cut(kv, "=")
	if hasValue && strings.Contains(value, "=") {
		return corev1.Taint{}, fmt.Errorf("taint %q: want key[=value]:effect, with one = at most", spec)
	}
	t := corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)}
	if err := checkTaint(t); err != nil {
		return corev1.Taint{}, fmt.Errorf("taint %q: %w", spec, err)
	}
	return t, nil
}

// checkTaint checks a taint as the kubelet checks its registerWithTaints.
func checkTaint(t corev1.Taint) error {
	if e := validation.IsQualifiedName(t.Key); len(e) > 0 {
		return fmt.Errorf("key %q: %s", t.Key, strings.Join(e, "; "))
	}
	if e := validation.IsValidLabelValue(t.Value); len(e) > 0 {
		return fmt.Errorf("value %q: %s", t.Value, strings.Join(e, "; "))
	}
	switch t.Effect {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		return nil
	}
	return fmt.Errorf("effect %q: want NoSchedule, PreferNoSchedule or NoExecute", t.Effect)
}
