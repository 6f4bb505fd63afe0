package controller

import (
	"bytes"
	"strings"
	"testing"
)

// --csr=approve needs no CA key (kube-controller-manager signs); --csr=sign, the
// default, does; other values are refused naming the three.
func TestRunCSRModeDecidesWhetherTheCAKeyIsNeeded(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--csr=sign"}, "--ca-cert and --ca-key are required with --csr=sign"},
		{nil, "--ca-cert and --ca-key are required with --csr=sign"},
		{[]string{"--csr=approve"}, "--inventory is required"},
		{[]string{"--csr=off"}, "--inventory is required"},
		{[]string{"--csr=trust"}, `--csr "trust": want sign, approve or off`},
		{[]string{"--csr=approve", "--leader-election-id="}, "--leader-election-id is empty"},
	} {
		var out bytes.Buffer
		err := Run(t.Context(), append([]string{"run"}, tc.args...), &out, &out)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run %v: error = %v, want %q", tc.args, err, tc.want)
		}
	}
}
