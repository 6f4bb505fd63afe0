package nodejoin

import (
	"strings"
	"testing"
)

func TestBenchJoinRefusesBadOptions(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "join", "-o", "yaml"}, `--output "yaml": want text or json`},
		{[]string{"bench", "join", "--nodes", "0"}, "--nodes 0: want between 1 and 60000"},
		{[]string{"bench", "join", "--nodes", "100,0"}, "--nodes 0: want between 1 and 60000"},
		{[]string{"bench", "join", "--identity", "aws-iam", "--baseline", "kcm"}, "--baseline kcm compares client certificates too"},
		{[]string{"bench", "join", "--baseline", "kcm,peer"}, "needs the module github.com/postfinance/kubelet-csr-approver"},
		{[]string{"bench", "join", "--baseline", "kcm,sloth"}, `"sloth" is no baseline`},
		{[]string{"bench", "join", "--nodes", "10,20", "--fault", "leader-kill"}, "--nodes 10,20 runs a size after another"},
		{[]string{"bench", "join", "--fault", "meteor"}, `--fault "meteor"`},
		{[]string{"bench", "join", "--duration", "1m", "--fault", "leader-kill"}, "--duration runs a soak"},
		{[]string{"bench", "plot", "/nonexistent.json"}, "/nonexistent.json"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := run(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}
