package chart

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	sigsyaml "sigs.k8s.io/yaml"
)

// deployments decodes the Deployments of a rendering.
func deployments(t *testing.T, rendered string) map[string]*appsv1.Deployment {
	t.Helper()
	out := map[string]*appsv1.Deployment{}
	for _, doc := range strings.Split(rendered, "\n---\n") {
		var head struct{ Kind string }
		if err := sigsyaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatal(err)
		}
		if head.Kind != "Deployment" {
			continue
		}
		d := &appsv1.Deployment{}
		if err := sigsyaml.UnmarshalStrict([]byte(doc), d); err != nil {
			t.Fatal(err)
		}
		out[d.Name] = d
	}
	return out
}

// Every pod of the chart runs on control-plane nodes by default, and a CA key is
// mounted only with csr.mode=sign, only into the approver's pods.
func TestEveryModeRunsOnControlPlaneAndMountsTheCAKeyOnlyWhenSigning(t *testing.T) {
	want := map[string][]string{
		"approver":    {"nodejoin-controller"},
		"webhook":     {"nodejoin-controller"},
		"addons":      {"nodejoin-controller", "nodejoin-addons"},
		"nodegroups":  {"nodejoin-controller", "nodejoin-nodegroups"},
		"hostnetwork": {"nodejoin-controller"},
	}
	for _, mode := range modes {
		deps := deployments(t, render(t, "--values", values(mode)))
		if len(deps) != len(want[mode]) {
			t.Errorf("%s: Deployments %v, want %v", mode, len(deps), want[mode])
		}
		for _, name := range want[mode] {
			d, ok := deps[name]
			if !ok {
				t.Errorf("%s: no Deployment %s", mode, name)
				continue
			}
			pod := d.Spec.Template.Spec
			if v, ok := pod.NodeSelector["node-role.kubernetes.io/control-plane"]; !ok || v != "" {
				t.Errorf("%s/%s: nodeSelector %v lacks node-role.kubernetes.io/control-plane", mode, name, pod.NodeSelector)
			}
			if !slices.ContainsFunc(pod.Tolerations, func(tl corev1.Toleration) bool {
				return tl.Key == "node-role.kubernetes.io/control-plane" && tl.Effect == corev1.TaintEffectNoSchedule && tl.Operator == corev1.TolerationOpExists
			}) {
				t.Errorf("%s/%s: no toleration of the control-plane taint: %+v", mode, name, pod.Tolerations)
			}
			if pod.ServiceAccountName != name {
				t.Errorf("%s/%s: service account %q, want its own", mode, name, pod.ServiceAccountName)
			}
			signs := mode == "nodegroups" && name == "nodejoin-controller" // ci/nodegroups-values.yaml signs
			mountsKey := slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Secret != nil && v.Secret.SecretName == "nodejoin-ca" })
			keyFlag := slices.ContainsFunc(pod.Containers[0].Args, func(a string) bool { return strings.HasPrefix(a, "--ca-key=") })
			if mountsKey != signs || keyFlag != signs {
				t.Errorf("%s/%s: CA key mounted %v, --ca-key %v; want %v", mode, name, mountsKey, keyFlag, signs)
			}
		}
	}
}

// On a node's network (hostNetwork, for control-plane nodes without a pod network) the
// pods keep cluster DNS, and a rollout replaces a replica in place: a surge pod would
// want the ports its node's replica holds and never be scheduled. On the pod network a
// rollout never drops below the replicas asked for.
func TestHostNetworkKeepsClusterDNSAndRollsInPlace(t *testing.T) {
	for _, tc := range []struct {
		mode                 string
		host                 bool
		dns                  corev1.DNSPolicy
		maxSurge, maxUnavail int
	}{
		{"approver", false, "", 1, 0},
		{"hostnetwork", true, corev1.DNSClusterFirstWithHostNet, 0, 1},
	} {
		d := deployments(t, render(t, "--values", values(tc.mode)))["nodejoin-controller"]
		if d == nil {
			t.Fatalf("%s: no Deployment nodejoin-controller", tc.mode)
		}
		pod, ru := d.Spec.Template.Spec, d.Spec.Strategy.RollingUpdate
		if pod.HostNetwork != tc.host || pod.DNSPolicy != tc.dns {
			t.Errorf("%s: hostNetwork %v, dnsPolicy %q; want %v, %q", tc.mode, pod.HostNetwork, pod.DNSPolicy, tc.host, tc.dns)
		}
		if ru == nil || ru.MaxSurge.IntValue() != tc.maxSurge || ru.MaxUnavailable.IntValue() != tc.maxUnavail {
			t.Errorf("%s: rolling update %+v, want maxSurge %d, maxUnavailable %d", tc.mode, ru, tc.maxSurge, tc.maxUnavail)
		}
	}
}

// The access-policy roles come with the flag that runs what uses them, and neither
// comes without the other: a role granted to a pod that never uses it is power for
// nothing, and the flag without the roles fails every binding.
func TestAccessPoliciesRolesComeWithTheirController(t *testing.T) {
	for _, on := range []bool{false, true} {
		out := render(t, "--values", values("approver"), "--set", fmt.Sprintf("accessPolicies.enabled=%v", on))
		args := deployments(t, out)["nodejoin-controller"].Spec.Template.Spec.Containers[0].Args
		flag := slices.Contains(args, "--access-policies")
		roles := strings.Contains(out, "name: nodejoin:controller:access-policies")
		if flag != on || roles != on {
			t.Errorf("accessPolicies.enabled=%v: --access-policies %v, roles %v", on, flag, roles)
		}
	}
}
