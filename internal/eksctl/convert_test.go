package eksctl

import (
	"encoding/json"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// convertText renders a conversion as the goldens hold it: the NodeGroup objects as
// YAML, then the ignored fields.
func convertText(t *testing.T, res *Result) string {
	t.Helper()
	var b strings.Builder
	for i := range res.NodeGroups {
		js, err := json.Marshal(&res.NodeGroups[i])
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(js, &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "status") // a new object has none
		data, err := yaml.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("---\n")
		b.Write(data)
	}
	b.WriteString("--- ignored\n")
	b.WriteString(ignoredText(res.Ignored))
	return b.String()
}

func convertFile(t *testing.T, name string, data []byte) *Result {
	t.Helper()
	f, err := Parse(data, name)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Convert(f)
	if err != nil {
		t.Fatal(err)
	}
	for i := range res.NodeGroups {
		if errs := res.NodeGroups[i].Validate(); len(errs) > 0 {
			t.Errorf("group %s does not validate: %v", res.NodeGroups[i].Name, errs.ToAggregate())
		}
	}
	return res
}

// The seeds' ClusterConfigs convert as written.
func TestConvertSeeds(t *testing.T) {
	for _, name := range []string{"seed000-ironman-2022", "seed001-bottlerocket", "seed001-windows", "seed002-demo-self-ng"} {
		t.Run(name, func(t *testing.T) {
			res := convertFile(t, name+".yaml", readFile(t, name+".yaml"))
			golden(t, name+".nodegroups.yaml", convertText(t, res))
		})
	}
}

// A self-managed group with most mapped fields, and a managed Spot group.
func TestConvertFields(t *testing.T) {
	res := convertFile(t, "fields.yaml", readFile(t, "fields.yaml"))
	golden(t, "fields.nodegroups.yaml", convertText(t, res))
}

func TestConvertErrors(t *testing.T) {
	const head = "apiVersion: eksctl.io/v1alpha5\nkind: ClusterConfig\nmetadata:\n  name: c1\n"
	tests := []struct {
		name, doc string
		want      []string
	}{
		{"desired above max", head + "managedNodeGroups:\n  - name: ng\n    desiredCapacity: 5\n    maxSize: 3\n",
			[]string{"line 7: field managedNodeGroups[0].desiredCapacity: 5 is above maxSize 3 (lower desiredCapacity or raise maxSize)"}},
		{"desired below min", head + "nodeGroups:\n  - name: ng\n    desiredCapacity: 1\n    minSize: 3\n",
			[]string{"nodeGroups[0].desiredCapacity: 1 is below minSize 3"}},
		{"both instance type fields", head + "managedNodeGroups:\n  - name: ng\n    instanceType: m5.large\n    instanceTypes: [m5.xlarge]\n",
			[]string{"managedNodeGroups[0].instanceTypes: given with instanceType (keep one of instanceType and instanceTypes)"}},
		{"ubuntu", head + "managedNodeGroups:\n  - name: ng\n    amiFamily: Ubuntu2204\n",
			[]string{`managedNodeGroups[0].amiFamily: "Ubuntu2204" is not supported`, "use amiFamily: AmazonLinux2023"}},
		{"reserved label", head + "managedNodeGroups:\n  - name: ng\n    labels: {kubernetes.io/role: x}\n",
			[]string{"managedNodeGroups[0].labels.kubernetes.io/role: the kubernetes.io/ and k8s.io/ prefixes are reserved"}},
		{"bad taint effect", head + "managedNodeGroups:\n  - name: ng\n    taints: [{key: a, value: b, effect: NoWay}]\n",
			[]string{`line 7: field managedNodeGroups[0].taints[0].effect: "NoWay" is not a taint effect (use NoSchedule, PreferNoSchedule or NoExecute)`}},
		{"update config both", head + "managedNodeGroups:\n  - name: ng\n    updateConfig: {maxUnavailable: 1, maxUnavailablePercentage: 20}\n",
			[]string{"managedNodeGroups[0].updateConfig: both maxUnavailable and maxUnavailablePercentage are set"}},
		{"maxUnavailable above max", head + "managedNodeGroups:\n  - name: ng\n    maxSize: 2\n    updateConfig: {maxUnavailable: 3}\n",
			[]string{"managedNodeGroups[0].updateConfig.maxUnavailable: 3 exceeds maxSize 2"}},
		{"maxPodsPerNode above int32", head + "managedNodeGroups:\n  - name: ng\n    maxPodsPerNode: 3000000000\n",
			[]string{"managedNodeGroups[0].maxPodsPerNode: 3000000000 is too large"}},
		{"same name twice", head + "nodeGroups:\n  - name: ng\nmanagedNodeGroups:\n  - name: ng\n",
			[]string{`managedNodeGroups[0].name: the name "ng" is taken by nodeGroups[0]`}},
		{"upper-case name", head + "managedNodeGroups:\n  - name: NG1\n",
			[]string{`managedNodeGroups[0].name: "NG1" cannot name a NodeGroup object`}},
		{"critical kubelet field", head + "nodeGroups:\n  - name: ng\n    kubeletExtraConfig: {authentication: {}}\n",
			[]string{"nodeGroups[0].kubeletExtraConfig.authentication: cannot be overridden"}},
		{"reserved Bottlerocket setting", head + "managedNodeGroups:\n  - name: ng\n    amiFamily: Bottlerocket\n    bottlerocket:\n      settings:\n        kubernetes: {cluster-name: x}\n",
			[]string{"managedNodeGroups[0].bottlerocket.settings.kubernetes.cluster-name: set by nodejoin"}},
		{"Bottlerocket settings elsewhere", head + "managedNodeGroups:\n  - name: ng\n    bottlerocket: {settings: {motd: hi}}\n",
			[]string{"managedNodeGroups[0].bottlerocket.settings: given for amiFamily AmazonLinux2023 (set amiFamily: Bottlerocket or remove the settings)"}},
		{"pre-bootstrap on Bottlerocket", head + "managedNodeGroups:\n  - name: ng\n    amiFamily: bottlerocket\n    preBootstrapCommands: [echo]\n",
			[]string{"managedNodeGroups[0].preBootstrapCommands: not supported for Bottlerocket"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse([]byte(tt.doc), "cluster.yaml")
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			_, err = Convert(f)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// eksctl's size defaults (validation.go): min defaults to desired or 2, max to
// desired or min (at least 1), desired to min.
func TestConvertScalingDefaults(t *testing.T) {
	const head = "apiVersion: eksctl.io/v1alpha5\nkind: ClusterConfig\nmetadata:\n  name: c1\nmanagedNodeGroups:\n  - name: ng\n"
	tests := []struct {
		sizes          string
		min, max, want int32
	}{
		{"", 2, 2, 2},
		{"    desiredCapacity: 3\n", 3, 3, 3},
		{"    minSize: 1\n", 1, 1, 1},
		{"    minSize: 1\n    maxSize: 5\n", 1, 5, 1},
		{"    desiredCapacity: 0\n", 0, 1, 0},
		{"    minSize: 0\n    desiredCapacity: 2\n", 0, 2, 2},
	}
	for _, tt := range tests {
		f, err := Parse([]byte(head+tt.sizes), "t")
		if err != nil {
			t.Fatal(err)
		}
		res, err := Convert(f)
		if err != nil {
			t.Fatalf("%q: %v", tt.sizes, err)
		}
		s := res.NodeGroups[0].Spec.Scaling
		if s.MinSize != tt.min || s.MaxSize != tt.max || s.DesiredSize == nil || *s.DesiredSize != tt.want {
			t.Errorf("%q: scaling = %d/%d/%v, want %d/%d/%d", tt.sizes, s.MinSize, s.MaxSize, s.DesiredSize, tt.min, tt.max, tt.want)
		}
	}
}
