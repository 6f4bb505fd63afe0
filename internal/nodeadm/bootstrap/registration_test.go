package bootstrap

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodejoin/nodejoin/api/nodeconfig/v1alpha1"
)

// The kubelet's labels and taints come from its flags and its configuration drop-in as
// the kubelet reads them: --node-labels accumulate, the last --register-with-taints
// wins and overrides registerWithTaints, and what the kubelet refuses is refused.
func TestKubeletRegistration(t *testing.T) {
	noSchedule := func(k, v string) corev1.Taint {
		return corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffectNoSchedule}
	}
	for name, tc := range map[string]struct {
		flags      []string
		config     string // registerWithTaints, JSON
		wantLabels map[string]string
		wantTaints []corev1.Taint
		wantErr    string
	}{
		"nothing": {flags: []string{"--max-pods=20", "--node-ip", "198.18.0.11"}, wantLabels: map[string]string{}},
		"EKS managed AL2023": {
			flags: []string{"--node-labels=eks.amazonaws.com/nodegroup=workers,eks.amazonaws.com/capacityType=ON_DEMAND,team=blue",
				"--register-with-taints=dedicated=gpu:NoSchedule,spot:PreferNoSchedule"},
			wantLabels: map[string]string{"eks.amazonaws.com/nodegroup": "workers", "eks.amazonaws.com/capacityType": "ON_DEMAND", "team": "blue"},
			wantTaints: []corev1.Taint{noSchedule("dedicated", "gpu"), {Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule}},
		},
		"labels accumulate, later values win": {
			flags:      []string{"--node-labels=a=1,b=2", "--v=2", "--node-labels", "b=3,node.kubernetes.io/lifecycle=spot,empty="},
			wantLabels: map[string]string{"a": "1", "b": "3", "node.kubernetes.io/lifecycle": "spot", "empty": ""},
		},
		"the last taints flag wins": {
			flags:      []string{"--register-with-taints=a=1:NoSchedule", "--register-with-taints=b=2:NoSchedule"},
			wantLabels: map[string]string{}, wantTaints: []corev1.Taint{noSchedule("b", "2")},
		},
		"the configuration's taints": {
			config:     `[{"key":"dedicated","value":"gpu","effect":"NoExecute"}]`,
			wantLabels: map[string]string{}, wantTaints: []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoExecute}},
		},
		"a flag overrides the configuration": {
			flags: []string{"--register-with-taints=a=1:NoSchedule"}, config: `[{"key":"dedicated","value":"gpu","effect":"NoExecute"}]`,
			wantLabels: map[string]string{}, wantTaints: []corev1.Taint{noSchedule("a", "1")},
		},
		"an empty flag clears the configuration's": {
			flags: []string{"--register-with-taints="}, config: `[{"key":"dedicated","value":"gpu","effect":"NoExecute"}]`,
			wantLabels: map[string]string{},
		},
		"a kubernetes.io label the kubelet may not set": {flags: []string{"--node-labels=node-role.kubernetes.io/worker="}, wantErr: "node-role.kubernetes.io/worker: a kubelet may set"},
		"a malformed label value":                       {flags: []string{"--node-labels=team=a b"}, wantErr: `team value "a b"`},
		"a taint without effect":                        {flags: []string{"--register-with-taints=dedicated=gpu"}, wantErr: `taint "dedicated=gpu": want key[=value]:effect`},
		"an unknown effect":                             {flags: []string{"--register-with-taints=dedicated=gpu:Sometimes"}, wantErr: `effect "Sometimes"`},
		"a taint given twice":                           {flags: []string{"--register-with-taints=a=1:NoSchedule,a=2:NoSchedule"}, wantErr: "given twice"},
		"a malformed configuration":                     {config: `{"key":"a"}`, wantErr: "spec.kubelet.config.registerWithTaints"},
		"a configuration taint with a bad effect":       {config: `[{"key":"a","effect":"Never"}]`, wantErr: "registerWithTaints[0]: effect"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := &v1alpha1.NodeConfig{}
			cfg.Spec.Kubelet.Flags = tc.flags
			if tc.config != "" {
				cfg.Spec.Kubelet.Config = v1alpha1.InlineDocument{"registerWithTaints": json.RawMessage(tc.config)}
			}
			reg, err := KubeletRegistration(cfg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(reg.Labels, tc.wantLabels) {
				t.Errorf("labels = %v, want %v", reg.Labels, tc.wantLabels)
			}
			if !reflect.DeepEqual(reg.Taints, tc.wantTaints) {
				t.Errorf("taints = %v, want %v", reg.Taints, tc.wantTaints)
			}
		})
	}
}
