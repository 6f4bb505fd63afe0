package eksctl

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run with -update to accept):\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func ignoredText(ig []Ignored) string {
	var b strings.Builder
	for _, i := range ig {
		fmt.Fprintf(&b, "%d\t%s\t%s\t%s\n", i.Line, i.Field, i.Value, i.Reason)
	}
	return b.String()
}

// The seeds' ClusterConfigs parse as written, and every field nodejoin does not use is
// reported with its line.
func TestParseSeeds(t *testing.T) {
	for _, name := range []string{"seed000-ironman-2022", "seed001-bottlerocket", "seed001-windows"} {
		t.Run(name, func(t *testing.T) {
			data := readFile(t, name+".yaml")
			if !IsClusterConfig(data) {
				t.Fatal("not recognised as a ClusterConfig")
			}
			f, err := Parse(data, name+".yaml")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, name+".ignored.txt", ignoredText(f.Ignored))
		})
	}
}

func TestParseSeed000Values(t *testing.T) {
	f, err := Parse(readFile(t, "seed000-ironman-2022.yaml"), "seed000")
	if err != nil {
		t.Fatal(err)
	}
	c := f.Config
	if c.Metadata.Name != "ironman-2022" || len(c.ManagedNodeGroups) != 1 || len(c.NodeGroups) != 0 {
		t.Fatalf("parsed %+v", c)
	}
	ng := c.ManagedNodeGroups[0]
	if ng.Name != "ng1-public-ssh" || ng.DesiredCapacity == nil || *ng.DesiredCapacity != 2 || ng.MinSize != nil {
		t.Errorf("group = %+v", ng.NodeGroupBase)
	}
	// The comment inside ssh does not hide its fields.
	var ssh []string
	for _, i := range f.Ignored {
		if strings.HasPrefix(i.Field, "managedNodeGroups[0].ssh.") {
			ssh = append(ssh, i.Field+"="+i.Value)
		}
	}
	if strings.Join(ssh, " ") != "managedNodeGroups[0].ssh.allow=true managedNodeGroups[0].ssh.publicKeyName=ironman-2022" {
		t.Errorf("ssh ignored = %v", ssh)
	}
}

func TestParseErrors(t *testing.T) {
	const head = "apiVersion: eksctl.io/v1alpha5\nkind: ClusterConfig\nmetadata:\n  name: c1\n"
	tests := []struct {
		name, doc string
		want      []string
	}{
		{"unknown group field", head + "managedNodeGroups:\n  - name: ng\n    desiredCapacty: 2\n",
			[]string{`line 7: field managedNodeGroups[0].desiredCapacty: unknown field (did you mean "desiredCapacity"?)`}},
		{"unknown top-level field, case", head + "ManagedNodeGroups: []\n",
			[]string{`line 5: field ManagedNodeGroups: unknown field (did you mean "managedNodeGroups"? field names are case-sensitive)`}},
		{"every unknown field", head + "nodeGroups:\n  - name: a\n    labelz: {}\n  - name: b\n    ssh: {alow: true}\n",
			[]string{"nodeGroups[0].labelz: unknown field", `nodeGroups[1].ssh.alow: unknown field (did you mean "allow"?)`}},
		{"managed groups take no kubeletExtraConfig", head + "managedNodeGroups:\n  - name: ng\n    kubeletExtraConfig: {maxPods: 3}\n",
			[]string{"managedNodeGroups[0].kubeletExtraConfig: unknown field"}},
		{"duplicate key", head + "managedNodeGroups:\n  - name: ng\n    minSize: 1\n    minSize: 2\n",
			[]string{"line 8: field managedNodeGroups[0].minSize: given twice (first on line 7) (keep one)"}},
		{"wrong type", head + "managedNodeGroups:\n  - name: ng\n    minSize: two\n",
			[]string{"minSize", "a string cannot be a int"}},
		{"wrong version", "apiVersion: eksctl.io/v1alpha4\nkind: ClusterConfig\nmetadata: {name: c}\n",
			[]string{`line 1: field apiVersion: version "eksctl.io/v1alpha4" is not supported (want eksctl.io/v1alpha5)`}},
		{"wrong kind", "apiVersion: eksctl.io/v1alpha5\nkind: NodeGroup\nmetadata: {name: c}\n",
			[]string{`line 2: not a ClusterConfig: kind "NodeGroup" of apiVersion "eksctl.io/v1alpha5" (want apiVersion: eksctl.io/v1alpha5, kind: ClusterConfig)`}},
		{"no name", "apiVersion: eksctl.io/v1alpha5\nkind: ClusterConfig\nmetadata: {region: r}\n",
			[]string{"metadata.name: missing"}},
		{"two documents", head + "---\n" + head, []string{"line 5: more than one YAML document"}},
		{"taints of another shape", head + "nodeGroups:\n  - name: a\n    taints: [{key: k, colour: red}]\n",
			[]string{"taints: want a list of {key, value, effect}", `unknown field "colour"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc), "cluster.yaml")
			if err == nil {
				t.Fatal("no error")
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Errorf("error %v is not an *Error", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if !strings.HasPrefix(err.Error(), "cluster.yaml") {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}

func TestTaintForms(t *testing.T) {
	const head = "apiVersion: eksctl.io/v1alpha5\nkind: ClusterConfig\nmetadata:\n  name: c1\nnodeGroups:\n  - name: a\n"
	tests := []struct {
		taints string
		want   Taints
	}{
		{"    taints: {b: \"v:NoSchedule\", a: \":NoExecute\"}\n", Taints{{Key: "a", Effect: "NoExecute"}, {Key: "b", Value: "v", Effect: "NoSchedule"}}},
		{"    taints: [{key: k, value: v, effect: PreferNoSchedule}]\n", Taints{{Key: "k", Value: "v", Effect: "PreferNoSchedule"}}},
	}
	for _, tt := range tests {
		f, err := Parse([]byte(head+tt.taints), "t")
		if err != nil {
			t.Fatal(err)
		}
		got := f.Config.NodeGroups[0].Taints
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%s: taints = %v, want %v", tt.taints, got, tt.want)
		}
	}
}

func TestIsClusterConfig(t *testing.T) {
	for doc, want := range map[string]bool{
		"apiVersion: eksctl.io/v1alpha5\nkind: ClusterConfig\n":                   true,
		"apiVersion: nodejoin.io/v1alpha1\nkind: NodeGroup\n---\napiVersion: x\n": false,
		"apiVersion: eksctl.io/v1alpha5\n---\napiVersion: x\n":                    true,
		"- a\n": false,
	} {
		if got := IsClusterConfig([]byte(doc)); got != want {
			t.Errorf("IsClusterConfig(%q) = %v", doc, got)
		}
	}
}
