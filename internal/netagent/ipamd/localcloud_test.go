package ipamd

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"

	"github.com/nodejoin/nodejoin/internal/localaws"
	"github.com/nodejoin/nodejoin/internal/netagent/ipamd/cloud"
	"github.com/nodejoin/nodejoin/internal/netagent/ipamd/pool"
	"github.com/nodejoin/nodejoin/internal/netagent/ipamrpc"
)

// localNode is one m5.large instance of the local cloud: its EC2 and IMDS served on
// loopback and reached through aws-sdk-go-v2, EC2 through the SDK's default chain with
// AWS_ENDPOINT_URL_EC2, as aws-node reaches them in a cluster.
type localNode struct {
	ec2  *localaws.EC2
	inst localaws.Instance
	sdk  cloud.SDK
	md   cloud.IMDS
}

func newLocalNode(t *testing.T) *localNode {
	t.Helper()
	e := localaws.NewEC2("111122223333")
	subnet := localaws.Subnet{ID: "subnet-00000000000000001", VPCID: "vpc-00000000000000001", AvailabilityZone: "us-west-2a", CIDR: netip.MustParsePrefix("198.18.0.0/16")}
	if err := e.AddSubnet(subnet); err != nil {
		t.Fatal(err)
	}
	inst := localaws.Instance{ID: "i-0000000000000000b", Type: "m5.large", AvailabilityZone: "us-west-2a", PrivateIPv4: "198.18.0.11",
		SubnetID: subnet.ID, VPCID: subnet.VPCID, VPCIPv4CIDRs: []string{"198.18.0.0/16"}}
	if err := localaws.InstanceDefaults(&inst); err != nil {
		t.Fatal(err)
	}
	if err := e.Launch(inst); err != nil {
		t.Fatal(err)
	}
	ec2Srv := httptest.NewServer(e)
	t.Cleanup(ec2Srv.Close)
	imdsSrv := httptest.NewServer(localaws.NewIMDS(inst, nil).WithEC2(e))
	t.Cleanup(imdsSrv.Close)

	dir := t.TempDir()
	t.Setenv("AWS_ENDPOINT_URL_EC2", ec2Srv.URL)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDLOCALNODE0000000")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "local-node-secret")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "none"))
	t.Setenv("AWS_REGION", "")
	md := cloud.IMDS{Client: imds.New(imds.Options{Endpoint: imdsSrv.URL})}
	got, err := md.Instance(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	sdk, err := cloud.NewSDK(t.Context(), got.Region)
	if err != nil {
		t.Fatal(err)
	}
	return &localNode{ec2: e, inst: inst, sdk: sdk, md: md}
}

func TestLocalCloudMetadata(t *testing.T) {
	n := newLocalNode(t)
	got, err := n.md.Instance(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != n.inst.ID || got.Type != "m5.large" || got.Region != "us-west-2" || got.PrimaryMAC != n.inst.MAC ||
		got.PrimaryIP.String() != "198.18.0.11" || got.PrimaryENIID != "eni-0000000000000000b" ||
		got.SubnetID != "subnet-00000000000000001" || got.SubnetCIDR.String() != "198.18.0.0/16" ||
		!slices.Equal(got.SecurityGroupIDs, []string{localaws.DefaultSecurityGroupID}) ||
		len(got.VPCCIDRs) != 1 || got.VPCCIDRs[0].String() != "198.18.0.0/16" {
		t.Fatalf("Instance() = %+v", got)
	}
	enis, err := n.md.ENIs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(enis) != 1 || enis[0].DeviceNumber != 0 || enis[0].ID != got.PrimaryENIID || len(enis[0].IPs) != 1 {
		t.Fatalf("ENIs() = %+v", enis)
	}
}

// TestLocalCloudCalls runs ipamd's EC2 calls one by one through the SDK against the
// local cloud, limits included.
func TestLocalCloudCalls(t *testing.T) {
	n := newLocalNode(t)
	ctx := t.Context()
	lim, err := n.sdk.InstanceTypeLimits(ctx, "m5.large")
	if err != nil || lim != (pool.Limits{ENIs: 3, IPv4PerENI: 10}) {
		t.Fatalf("InstanceTypeLimits(m5.large) = %+v, %v", lim, err)
	}
	enis, err := n.sdk.InstanceENIs(ctx, n.inst.ID)
	if err != nil || len(enis) != 1 || enis[0].DeviceNumber != 0 || enis[0].PrimaryIP.String() != "198.18.0.11" {
		t.Fatalf("InstanceENIs = %+v, %v", enis, err)
	}
	primary := enis[0].ID
	ips, err := n.sdk.AssignIPs(ctx, primary, 9)
	if err != nil || len(ips) != 9 {
		t.Fatalf("AssignIPs(9) = %v, %v", ips, err)
	}
	if _, err := n.sdk.AssignIPs(ctx, primary, 1); cloud.ErrorCode(err) != cloud.CodeIPLimitExceeded {
		t.Fatalf("AssignIPs beyond m5.large's 10: %v", err)
	}
	e, err := n.sdk.CreateENI(ctx, cloud.CreateENIInput{SubnetID: "subnet-00000000000000001", SecurityGroupIDs: []string{localaws.DefaultSecurityGroupID},
		Description: "aws-K8S-" + n.inst.ID, Tags: map[string]string{cloud.TagInstanceID: n.inst.ID}, SecondaryIPs: 3})
	if err != nil || len(e.Secondary) != 3 || e.Tags[cloud.TagInstanceID] != n.inst.ID {
		t.Fatalf("CreateENI = %+v, %v", e, err)
	}
	if leaked, err := n.sdk.LeakedENIs(ctx, n.inst.ID); err != nil || len(leaked) != 1 || leaked[0].ID != e.ID {
		t.Fatalf("LeakedENIs = %+v, %v", leaked, err)
	}
	att, err := n.sdk.AttachENI(ctx, n.inst.ID, e.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.sdk.SetDeleteOnTermination(ctx, e.ID, att); err != nil {
		t.Fatalf("SetDeleteOnTermination: %v", err)
	}
	if err := n.sdk.UnassignIPs(ctx, e.ID, e.Secondary[:1]); err != nil {
		t.Fatal(err)
	}
	got, err := n.sdk.DescribeENI(ctx, e.ID)
	if err != nil || got.AttachmentID != att || got.DeviceNumber != 1 || len(got.Secondary) != 2 {
		t.Fatalf("DescribeENI = %+v, %v", got, err)
	}
	if err := n.sdk.DetachENI(ctx, att); err != nil {
		t.Fatal(err)
	}
	if err := n.sdk.DeleteENI(ctx, e.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := n.sdk.DescribeENI(ctx, e.ID); cloud.ErrorCode(err) != cloud.CodeENINotFound {
		t.Fatalf("DescribeENI of a deleted ENI: %v", err)
	}
}

// TestLocalCloudDaemon runs ipamd against the local cloud: an m5.large hands out
// exactly its 27 pod addresses over three ENIs, refuses the 28th with "pool empty",
// and after a restart every pod keeps its address.
func TestLocalCloudDaemon(t *testing.T) {
	n := newLocalNode(t)
	dir := t.TempDir()
	host := &fakeHost{}
	start := func() *running {
		d, err := New(Options{
			Knobs:      Knobs{Pool: pool.Config{WarmENITarget: 1}, Cooldown: 30 * time.Second, MTU: 9001, VethPrefix: "eni", PluginLogLevel: "debug"},
			CNIConfDir: filepath.Join(dir, "net.d"), StateDir: filepath.Join(dir, "run"),
			PoolInterval: 20 * time.Millisecond, ReconcileInterval: time.Hour,
			Metadata: n.md, EC2: n.sdk, Host: host,
			Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		r := &running{d: d, cancel: cancel, done: make(chan error, 1)}
		go func() { r.done <- d.Run(ctx) }()
		t.Cleanup(func() { r.stop(t) })
		return r
	}
	r := start()
	c := r.ready(t)
	if st := r.d.State(); st.Limits.MaxPods != 29 || st.Pool.Total != 9 {
		t.Fatalf("after the first fill: limits %+v, pool %+v; want max pods 29 and the primary ENI's 9", st.Limits, st.Pool)
	}
	addrs := map[string]string{}
	for i := range 27 {
		id := fmt.Sprintf("pod%02d", i)
		rep := addRetrying(t, c, id)
		if other, dup := addrs[rep.IPv4Addr]; dup {
			t.Fatalf("%s and %s both got %s", other, id, rep.IPv4Addr)
		}
		addrs[rep.IPv4Addr] = id
	}
	if _, err := add(t.Context(), c, "pod27"); !ipamrpc.IsPoolEmpty(err) {
		t.Fatalf("28th pod on an m5.large: err = %v, want pool empty", err)
	}
	nics := n.ec2.InstanceNetworkInterfaces(n.inst.ID)
	if len(nics) != 3 {
		t.Fatalf("%d ENIs attached, want 3", len(nics))
	}
	for _, nic := range nics {
		if len(nic.PrivateIPv4s) != 10 {
			t.Errorf("ENI %s (device %d) holds %d addresses, want 10", nic.ID, nic.Attachment.DeviceIndex, len(nic.PrivateIPv4s))
		}
		if nic.Attachment.DeviceIndex > 0 && !nic.Attachment.DeleteOnTermination {
			t.Errorf("ENI %s is not deleted with the instance", nic.ID)
		}
	}
	if st := r.d.State(); st.LastEC2Error != nil && st.LastEC2Error.Code != cloud.CodeIPLimitExceeded {
		t.Errorf("last EC2 error = %+v", st.LastEC2Error)
	}
	r.stop(t)

	r2 := start()
	c2 := r2.ready(t)
	for ip, id := range addrs {
		rep, err := add(t.Context(), c2, id)
		if err != nil || rep.IPv4Addr != ip {
			t.Fatalf("after the restart %s got %v, %v; want %s", id, rep, err, ip)
		}
	}
	if st := r2.d.State(); st.Pool.Assigned != 27 || st.Pool.Total != 27 || st.Pool.ENIs != 3 {
		t.Fatalf("pool after the restart = %+v", st.Pool)
	}
}
