package cniplugin

import (
	"errors"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodejoin/nodejoin/internal/netagent/ipamrpc"
)

func TestIPAMDErrorCodes(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		code uint
		want string
	}{
		{"pool empty", ipamrpc.ErrPoolEmpty, types.ErrTryAgainLater, "warm pool"},
		{"unavailable", status.Error(codes.Unavailable, "connect: no such file"), types.ErrTryAgainLater, "aws-node"},
		{"timeout", status.Error(codes.DeadlineExceeded, "slow"), types.ErrTryAgainLater, "did not answer"},
		{"version", ipamrpc.CheckVersion("nodejoin-ipam/0"), ErrIPAMD, "same nodejoin-netagent image"},
		{"other", errors.New("boom"), ErrIPAMD, "failed the request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ipamdError("default/web-0", "/run/ipamd.sock", tc.err)
			if got.Code != tc.code || !strings.Contains(got.Error(), tc.want) || !strings.Contains(got.Msg, "default/web-0") {
				t.Fatalf("ipamdError = %d %q; want code %d naming the pod and %q", got.Code, got.Error(), tc.code, tc.want)
			}
		})
	}
}
