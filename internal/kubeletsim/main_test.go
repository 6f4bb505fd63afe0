package kubeletsim

import (
	"context"
	"os"
	"testing"

	"github.com/nodejoin/nodejoin/internal/cmd/nodeadm"
)

// helperEnv makes the test binary run as nodeadm, for the credential-plugin test: the
// simulated kubelet runs `nodeadm get-token` exactly as a kubeconfig written by nodeadm
// tells the real kubelet to.
const helperEnv = "KUBELETSIM_TEST_RUN_AS"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "nodeadm" {
		if err := nodeadm.Run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
