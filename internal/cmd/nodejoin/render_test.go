package nodejoin

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/nodejoin/nodejoin/internal/printer"
	"github.com/nodejoin/nodejoin/internal/printer/printertest"
	"github.com/nodejoin/nodejoin/internal/sandbox"
)

var testCluster = sandbox.Cluster{
	Name: "demo", Running: true, PID: 4242, Network: "namespace",
	Endpoint: "https://127.0.0.1:40123", Kubeconfig: "/state/nodejoin/demo/kubeconfig",
	StateDir: "/state/nodejoin/demo", LogDir: "/state/nodejoin/demo/logs",
	Nodes: []sandbox.Node{
		{Name: "ip-198-18-0-11.local.internal", InstanceID: "i-0123456789abcdef0", IP: "198.18.0.11", Kubelet: "real", ReadySeconds: 7.3},
		{Name: "ip-198-18-0-12.local.internal", InstanceID: "i-0fedcba9876543210", IP: "198.18.0.12", Kubelet: "sim", ReadySeconds: 1.2},
	},
}

func TestUpSummaryOutput(t *testing.T) {
	tests := []struct {
		file     string
		output   printer.Format
		detached bool
	}{
		{"up-foreground.txt", printer.Text, false},
		{"up-detached.txt", printer.Text, true},
		{"up.json", printer.JSON, true},
		{"up.yaml", printer.YAML, true},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			var out bytes.Buffer
			o := &upOptions{output: tt.output}
			if err := o.printSummary(&out, testCluster, tt.detached, nil); err != nil {
				t.Fatal(err)
			}
			printertest.Golden(t, tt.file, out.String())
		})
	}
}

func TestEveryCommandHasAnExample(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Name() != "help" && strings.TrimSpace(c.Example) == "" {
			t.Errorf("`%s --help` has no Example section", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(rootCommand())
}

func TestGetClustersOfAnEmptyStateRoot(t *testing.T) {
	for _, tt := range []struct{ output, want string }{{"text", "No clusters."}, {"json", "[]\n"}} {
		out, err := run(t, "get", "clusters", "-o", tt.output)
		if err != nil || !strings.Contains(out, tt.want) {
			t.Errorf("get clusters -o %s = %q, %v", tt.output, out, err)
		}
	}
}
