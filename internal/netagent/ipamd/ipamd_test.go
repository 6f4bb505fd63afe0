package ipamd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodejoin/nodejoin/internal/netagent/ipamd/cloud"
	"github.com/nodejoin/nodejoin/internal/netagent/ipamd/pool"
	"github.com/nodejoin/nodejoin/internal/netagent/ipamrpc"
)

// waitFor polls cond until it holds, failing after a generous deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type node struct {
	t        *testing.T
	ec2      *fakeEC2
	host     *fakeHost
	clk      *clock
	stateDir string
	confDir  string
}

func newNode(t *testing.T, limits pool.Limits) *node {
	dir := t.TempDir()
	return &node{t: t, ec2: newFakeEC2(limits), host: &fakeHost{}, clk: newClock(),
		stateDir: filepath.Join(dir, "run"), confDir: filepath.Join(dir, "net.d")}
}

type running struct {
	d      *Daemon
	cancel context.CancelFunc
	done   chan error
	client *ipamrpc.Client
}

func (n *node) start(k Knobs) *running {
	n.t.Helper()
	if k.MTU == 0 {
		k.MTU = 9001
	}
	if k.VethPrefix == "" {
		k.VethPrefix = "eni"
	}
	d, err := New(Options{
		Knobs: k, CNIConfDir: n.confDir, StateDir: n.stateDir, LogDir: filepath.Join(n.stateDir, "log"),
		PoolInterval: 10 * time.Millisecond, ShrinkInterval: 30 * time.Second, ReconcileInterval: time.Hour,
		Metadata: fakeMetadata{n.ec2}, EC2: n.ec2, Host: n.host, Now: n.clk.now,
		Logger: slog.New(slog.NewTextHandler(testWriter{n.t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		n.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{d: d, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- d.Run(ctx) }()
	n.t.Cleanup(func() { r.stop(n.t) })
	return r
}

// ready waits for the daemon to be ready and connects a plugin-side client.
func (r *running) ready(t *testing.T) *ipamrpc.Client {
	t.Helper()
	waitFor(t, "ipamd ready", r.d.Ready)
	if r.client == nil {
		c, err := ipamrpc.Dial(r.d.SocketPath())
		if err != nil {
			t.Fatal(err)
		}
		r.client = c
	}
	return r.client
}

func (r *running) stop(t *testing.T) {
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	if r.client != nil {
		_ = r.client.Close()
	}
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("ipamd did not stop")
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func (n *node) conflistExists() bool {
	_, err := os.Stat(filepath.Join(n.confDir, ConflistName))
	return err == nil
}

func add(ctx context.Context, c *ipamrpc.Client, id string) (*ipamrpc.AddReply, error) {
	return c.AddNetwork(ctx, &ipamrpc.AddRequest{ContainerID: id, IfName: "eth0", NetworkName: "aws-cni", PodName: "pod-" + id, PodNamespace: "default"})
}

func del(ctx context.Context, c *ipamrpc.Client, id string) (*ipamrpc.DelReply, error) {
	return c.DelNetwork(ctx, &ipamrpc.DelRequest{ContainerID: id, IfName: "eth0", NetworkName: "aws-cni", Reason: "PodDeleted"})
}

// addRetrying adds like a kubelet retrying a sandbox: again while the pool is empty.
func addRetrying(t *testing.T, c *ipamrpc.Client, id string) *ipamrpc.AddReply {
	t.Helper()
	var got *ipamrpc.AddReply
	waitFor(t, "an address for "+id, func() bool {
		r, err := add(t.Context(), c, id)
		if err != nil && !ipamrpc.IsPoolEmpty(err) {
			t.Fatalf("AddNetwork(%s): %v", id, err)
		}
		got = r
		return err == nil
	})
	return got
}

func healthz(t *testing.T, d *Daemon) int {
	rec := httptest.NewRecorder()
	d.introspectionHandler().ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/healthz", nil))
	return rec.Code
}

// TestConflistOnlyWhileReady: a stale conflist goes before anything else; none exists
// while the pool is being filled; it exists once ipamd serves; it goes on shutdown.
func TestConflistOnlyWhileReady(t *testing.T) {
	n := newNode(t, pool.Limits{ENIs: 3, IPv4PerENI: 4})
	if err := os.MkdirAll(n.confDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(n.confDir, ConflistName), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	release := n.ec2.hold("AssignPrivateIpAddresses")
	r := n.start(Knobs{Pool: pool.Config{WarmENITarget: 1}, Cooldown: 30 * time.Second})
	waitFor(t, "the first pool fill to reach EC2", func() bool { return n.ec2.count("AssignPrivateIpAddresses") > 0 })
	if n.conflistExists() {
		t.Fatal("the conflist exists while ipamd fills its pool")
	}
	if r.d.Ready() || healthz(t, r.d) != http.StatusServiceUnavailable {
		t.Fatalf("ready = %v, /healthz = %d while the pool is not filled", r.d.Ready(), healthz(t, r.d))
	}
	if _, err := os.Stat(r.d.SocketPath()); err == nil {
		t.Fatal("the gRPC socket exists before the pool is filled")
	}
	release()
	r.ready(t)
	b, err := os.ReadFile(filepath.Join(n.confDir, ConflistName))
	if err != nil {
		t.Fatalf("ipamd is ready but wrote no conflist: %v", err)
	}
	var conf struct {
		Name    string           `json:"name"`
		Plugins []map[string]any `json:"plugins"`
	}
	if err := json.Unmarshal(b, &conf); err != nil || conf.Name != "aws-cni" || len(conf.Plugins) != 2 ||
		conf.Plugins[0]["type"] != "nodejoin-cni" || conf.Plugins[0]["ipamdSocket"] != r.d.SocketPath() || conf.Plugins[1]["type"] != "portmap" {
		t.Fatalf("conflist = %s (%v)", b, err)
	}
	if healthz(t, r.d) != http.StatusOK {
		t.Fatalf("/healthz = %d when ready", healthz(t, r.d))
	}
	if st := r.d.State(); st.Pool.Total != 3 || st.Pool.Free != 3 {
		t.Fatalf("pool after the first fill = %+v, want 3 free (one ENI's worth)", st.Pool)
	}
	r.stop(t)
	if n.conflistExists() {
		t.Fatal("the conflist outlived ipamd")
	}
}

// TestEC2FailureKeepsNodeNotReady: while EC2 refuses, the node has no conflist and
// /v1/state says why; once EC2 answers, ipamd becomes ready.
func TestEC2FailureKeepsNodeNotReady(t *testing.T) {
	n := newNode(t, pool.Limits{ENIs: 3, IPv4PerENI: 4})
	n.ec2.setFail("AssignPrivateIpAddresses", cloud.CodeUnauthorized)
	r := n.start(Knobs{Pool: pool.Config{WarmENITarget: 1}})
	waitFor(t, "the EC2 error on /v1/state", func() bool { return r.d.State().LastEC2Error != nil })
	e := r.d.State().LastEC2Error
	if e.Operation != "AssignPrivateIpAddresses" || e.Code != cloud.CodeUnauthorized || !strings.Contains(e.Message, "injected") {
		t.Fatalf("last EC2 error = %+v", e)
	}
	if n.conflistExists() || r.d.Ready() {
		t.Fatal("ipamd ready while EC2 refuses to assign addresses")
	}
	n.ec2.setFail("AssignPrivateIpAddresses", "")
	r.ready(t)
	if !n.conflistExists() {
		t.Fatal("no conflist once ready")
	}
}

// TestPoolExhaustion: a full instance answers "pool empty"; an address released is
// handed out again only after the cool-down.
func TestPoolExhaustion(t *testing.T) {
	n := newNode(t, pool.Limits{ENIs: 1, IPv4PerENI: 4})
	r := n.start(Knobs{Pool: pool.Config{WarmENITarget: 1}, Cooldown: 30 * time.Second})
	c := r.ready(t)
	ctx := t.Context()
	got := map[string]string{}
	for _, id := range []string{"a", "b", "c"} {
		rep, err := add(ctx, c, id)
		if err != nil {
			t.Fatalf("AddNetwork(%s): %v", id, err)
		}
		got[id] = rep.IPv4Addr
		if rep.RouteTableID != 254 || rep.DeviceNumber != 0 || rep.MTU != 9001 || len(rep.VPCv4CIDRs) != 1 {
			t.Errorf("AddNetwork(%s) = %+v", id, rep)
		}
	}
	if rep, err := add(ctx, c, "a"); err != nil || rep.IPv4Addr != got["a"] {
		t.Fatalf("repeated ADD of a = %v, %v; want %s", rep, err, got["a"])
	}
	if _, err := add(ctx, c, "d"); !ipamrpc.IsPoolEmpty(err) {
		t.Fatalf("AddNetwork on a full instance: err = %v, want pool empty", err)
	}
	if rep, err := del(ctx, c, "b"); err != nil || rep.IPv4Addr != got["b"] {
		t.Fatalf("DelNetwork(b) = %v, %v", rep, err)
	}
	if rep, err := del(ctx, c, "b"); err != nil || rep.IPv4Addr != "" {
		t.Fatalf("repeated DEL of b = %v, %v; want an empty reply", rep, err)
	}
	if _, err := add(ctx, c, "d"); !ipamrpc.IsPoolEmpty(err) {
		t.Fatalf("AddNetwork during b's cool-down: err = %v, want pool empty", err)
	}
	n.clk.advance(30 * time.Second)
	if rep, err := add(ctx, c, "d"); err != nil || rep.IPv4Addr != got["b"] {
		t.Fatalf("AddNetwork after the cool-down = %v, %v; want b's %s", rep, err, got["b"])
	}
	if _, err := c.AddNetwork(ctx, &ipamrpc.AddRequest{IfName: "eth0"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("AddNetwork without a container ID: %v", err)
	}
	if _, err := r.d.AddNetwork(ctx, &ipamrpc.AddRequest{ClientVersion: "nodejoin-ipam/0", ContainerID: "x", IfName: "eth0"}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("AddNetwork from another plugin version: %v", err)
	}
}

// TestGrowsAcrossENIs: pods beyond the primary ENI get addresses on new ENIs, attached
// at the next device index, set up in the node, with their route tables.
func TestGrowsAcrossENIs(t *testing.T) {
	n := newNode(t, pool.Limits{ENIs: 3, IPv4PerENI: 4})
	r := n.start(Knobs{Pool: pool.Config{WarmENITarget: 1}})
	c := r.ready(t)
	seen := map[string]string{}
	for i := range 9 {
		id := fmt.Sprintf("p%d", i)
		rep := addRetrying(t, c, id)
		if other, dup := seen[rep.IPv4Addr]; dup {
			t.Fatalf("%s got %s, which %s holds", id, rep.IPv4Addr, other)
		}
		seen[rep.IPv4Addr] = id
		want := 254
		if rep.DeviceNumber > 0 {
			want = rep.DeviceNumber + 1
		}
		if rep.RouteTableID != want {
			t.Errorf("%s on device %d has route table %d, want %d", id, rep.DeviceNumber, rep.RouteTableID, want)
		}
	}
	if _, err := add(t.Context(), c, "p9"); !ipamrpc.IsPoolEmpty(err) {
		t.Fatalf("tenth pod on a 3×3 instance: err = %v, want pool empty", err)
	}
	enis := n.ec2.attached()
	if len(enis) != 3 || enis[1].DeviceNumber != 1 || enis[2].DeviceNumber != 2 {
		t.Fatalf("attached ENIs = %+v, want devices 0, 1, 2", enis)
	}
	if got := n.host.ids(); len(got) != 2 || got[0] != enis[1].ID && got[0] != enis[2].ID {
		t.Fatalf("ENIs set up in the node = %v, want the two secondary ones", got)
	}
	for _, e := range enis[1:] {
		if e.Description != "aws-K8S-i-0123" || e.Tags[cloud.TagInstanceID] != "i-0123" {
			t.Errorf("ENI %s: description %q, tags %v", e.ID, e.Description, e.Tags)
		}
	}
	if n.ec2.count("ModifyNetworkInterfaceAttribute") != 2 {
		t.Errorf("ModifyNetworkInterfaceAttribute called %d times, want once per new ENI", n.ec2.count("ModifyNetworkInterfaceAttribute"))
	}
}

// TestRestartKeepsAllocations: ipamd stopped with allocations in place comes back with
// them; an address EC2 took away meanwhile is dropped and its sandbox gets a new one;
// nothing is assigned twice and every address EC2 lists is either held or free.
func TestRestartKeepsAllocations(t *testing.T) {
	n := newNode(t, pool.Limits{ENIs: 3, IPv4PerENI: 4})
	r := n.start(Knobs{Pool: pool.Config{WarmENITarget: 1}, Cooldown: 30 * time.Second})
	c := r.ready(t)
	before := map[string]string{}
	for i := range 5 {
		id := fmt.Sprintf("p%d", i)
		before[id] = addRetrying(t, c, id).IPv4Addr
	}
	r.stop(t)
	if n.conflistExists() {
		t.Fatal("conflist left after shutdown")
	}
	n.ec2.unassignBehindTheBack(netip.MustParseAddr(before["p1"]))

	r2 := n.start(Knobs{Pool: pool.Config{WarmENITarget: 1}, Cooldown: 30 * time.Second})
	c2 := r2.ready(t)
	after := map[string]string{}
	for i := range 5 {
		id := fmt.Sprintf("p%d", i)
		after[id] = addRetrying(t, c2, id).IPv4Addr
		if id != "p1" && after[id] != before[id] {
			t.Errorf("%s had %s before the restart and %s after", id, before[id], after[id])
		}
	}
	if after["p1"] == before["p1"] {
		t.Errorf("p1 kept %s, which EC2 no longer lists", before["p1"])
	}
	holders := map[string]string{}
	for id, ip := range after {
		if other, dup := holders[ip]; dup {
			t.Fatalf("%s assigned to %s and %s", ip, other, id)
		}
		holders[ip] = id
	}
	// Nothing leaked: the datastore holds exactly what EC2 lists.
	ec2IPs := map[string]bool{}
	for _, e := range n.ec2.attached() {
		for _, ip := range e.Secondary {
			ec2IPs[ip.String()] = true
		}
	}
	st := r2.d.State()
	held := 0
	for _, e := range st.ENIs {
		for _, a := range e.IPs {
			if !ec2IPs[a.IP] {
				t.Errorf("datastore holds %s, which EC2 does not list", a.IP)
			}
			delete(ec2IPs, a.IP)
			if a.State == "assigned" {
				held++
			}
		}
	}
	if len(ec2IPs) != 0 {
		t.Errorf("addresses on the ENIs the datastore does not know (leaked): %v", ec2IPs)
	}
	if held != 5 {
		t.Errorf("%d addresses assigned after the restart, want 5", held)
	}
}

// TestShrinkGivesSurplusBack: under WARM_IP_TARGET, released addresses go back to EC2
// after their cool-down, and an emptied ENI is detached and deleted.
func TestShrinkGivesSurplusBack(t *testing.T) {
	n := newNode(t, pool.Limits{ENIs: 3, IPv4PerENI: 4})
	r := n.start(Knobs{Pool: pool.Config{WarmIPTarget: 1}, Cooldown: 30 * time.Second})
	c := r.ready(t)
	for i := range 6 {
		addRetrying(t, c, fmt.Sprintf("p%d", i))
	}
	waitFor(t, "a second ENI", func() bool { return len(n.ec2.attached()) >= 2 })
	for i := range 6 {
		if _, err := del(t.Context(), c, fmt.Sprintf("p%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the pool to shrink to one ENI with one address", func() bool {
		n.clk.advance(31 * time.Second)
		r.d.wake()
		enis := n.ec2.attached()
		return len(enis) == 1 && len(enis[0].Secondary) == 1
	})
	if n.ec2.count("UnassignPrivateIpAddresses") == 0 || n.ec2.count("DetachNetworkInterface") == 0 || n.ec2.count("DeleteNetworkInterface") == 0 {
		t.Errorf("calls: %v", n.ec2.calls)
	}
	if got := n.host.ids(); len(got) != 0 {
		t.Errorf("ENIs still set up in the node: %v", got)
	}
	if st := r.d.State(); st.Pool.ENIs != 1 || st.Pool.Total != 1 {
		t.Errorf("pool = %+v", st.Pool)
	}
}

// TestDeleteOnTerminationUnsupported: an EC2 without ModifyNetworkInterfaceAttribute
// is told about once and skipped; the ENI is used all the same.
func TestDeleteOnTerminationUnsupported(t *testing.T) {
	n := newNode(t, pool.Limits{ENIs: 3, IPv4PerENI: 4})
	n.ec2.noModify = true
	r := n.start(Knobs{Pool: pool.Config{WarmENITarget: 1}})
	c := r.ready(t)
	for i := range 6 {
		addRetrying(t, c, fmt.Sprintf("p%d", i))
	}
	waitFor(t, "a third ENI", func() bool { return len(n.ec2.attached()) == 3 })
	if !r.d.State().DeleteOnTerminationUnsupported {
		t.Error("state does not say delete-on-termination is unsupported")
	}
	if got := n.ec2.count("ModifyNetworkInterfaceAttribute"); got != 1 {
		t.Errorf("ModifyNetworkInterfaceAttribute called %d times, want once", got)
	}
}

// TestAttachFailureUndoes: an ENI that cannot be attached is deleted again.
func TestAttachFailureUndoes(t *testing.T) {
	n := newNode(t, pool.Limits{ENIs: 3, IPv4PerENI: 4})
	n.host.fail = errors.New("no such link")
	r := n.start(Knobs{Pool: pool.Config{WarmENITarget: 1}})
	c := r.ready(t)
	for i := range 2 { // the second pod makes the pool short of an ENI
		addRetrying(t, c, fmt.Sprintf("p%d", i))
	}
	waitFor(t, "a failed ENI set-up", func() bool { return r.d.State().LastPoolError != "" })
	waitFor(t, "the ENI to be deleted", func() bool { return n.ec2.count("DeleteNetworkInterface") > 0 })
	r.stop(t) // no ENI is mid-way when the ENIs are counted
	if got := len(n.ec2.attached()); got != 1 {
		t.Errorf("%d ENIs attached after failed set-ups, want 1", got)
	}
	n.ec2.mu.Lock()
	left := len(n.ec2.enis)
	n.ec2.mu.Unlock()
	if left != 1 {
		t.Errorf("%d ENIs exist after failed set-ups, want only the primary", left)
	}
}

func TestMetricsAndState(t *testing.T) {
	n := newNode(t, pool.Limits{ENIs: 3, IPv4PerENI: 4})
	r := n.start(Knobs{Pool: pool.Config{WarmENITarget: 1}})
	c := r.ready(t)
	addRetrying(t, c, "a")
	rec := httptest.NewRecorder()
	r.d.metricsHandler().ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		"awscni_assigned_ip_addresses 1",
		"awscni_eni_max 3",
		"awscni_ip_max 9",
		`awscni_ec2api_req_count{fn="AssignPrivateIpAddresses"}`,
		"awscni_add_ip_req_count 1",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	rec = httptest.NewRecorder()
	r.d.introspectionHandler().ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/v1/state", nil))
	var st State
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
		t.Fatalf("/v1/state: %v\n%s", err, rec.Body)
	}
	if !st.Ready || st.InstanceID != "i-0123" || st.Limits.MaxPods != 11 || st.Pool.Assigned != 1 || len(st.ENIs) == 0 {
		t.Fatalf("/v1/state = %s", rec.Body)
	}
	found := false
	for _, e := range st.ENIs {
		for _, a := range e.IPs {
			if a.State == "assigned" && a.ContainerID == "a" && a.Pod == "default/pod-a" {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("/v1/state does not show a's address: %s", rec.Body)
	}
}

func TestKnobsFromEnv(t *testing.T) {
	tests := []struct {
		env     map[string]string
		want    func(Knobs) bool
		wantErr string
	}{
		{map[string]string{}, func(k Knobs) bool {
			return k.Pool.WarmENITarget == 1 && k.Pool.MaxENI == -1 && k.Cooldown == 30*time.Second && k.MTU == 9001 && k.VethPrefix == "eni"
		}, ""},
		{map[string]string{"WARM_IP_TARGET": "2", "MINIMUM_IP_TARGET": "10", "IP_COOLDOWN_PERIOD": "0", "POD_MTU": "1500"}, func(k Knobs) bool {
			return k.Pool.WarmIPTarget == 2 && k.Pool.MinimumIPTarget == 10 && k.Cooldown == 0 && k.MTU == 1500
		}, ""},
		{map[string]string{"WARM_ENI_TARGET": "x"}, nil, "WARM_ENI_TARGET"},
		{map[string]string{"IP_COOLDOWN_PERIOD": "-1"}, nil, "IP_COOLDOWN_PERIOD"},
		{map[string]string{"AWS_VPC_ENI_MTU": "9002"}, nil, "AWS_VPC_ENI_MTU"},
		{map[string]string{"AWS_VPC_K8S_CNI_VETHPREFIX": "vlan"}, nil, "VETHPREFIX"},
		{map[string]string{"AWS_VPC_K8S_PLUGIN_LOG_FILE": "stdout"}, nil, "stdout"},
		{map[string]string{"ENABLE_PREFIX_DELEGATION": "true"}, nil, "secondary IPs only"},
	}
	for _, tt := range tests {
		k, err := KnobsFromEnv(func(s string) string { return tt.env[s] })
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("KnobsFromEnv(%v): err = %v, want one naming %s", tt.env, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !tt.want(k) {
			t.Errorf("KnobsFromEnv(%v) = %+v, %v", tt.env, k, err)
		}
	}
}

// TestStopDuringStartUp: a SIGTERM while EC2 refuses the first fill ends ipamd at once
// (with the reason), its servers stopped and no conflist.
func TestStopDuringStartUp(t *testing.T) {
	n := newNode(t, pool.Limits{ENIs: 3, IPv4PerENI: 4})
	n.ec2.setFail("AssignPrivateIpAddresses", cloud.CodeUnauthorized)
	d, err := New(Options{
		Knobs: Knobs{Pool: pool.Config{WarmENITarget: 1}, MTU: 9001, VethPrefix: "eni"}, CNIConfDir: n.confDir, StateDir: n.stateDir,
		IntrospectionAddr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0",
		Metadata: fakeMetadata{n.ec2}, EC2: n.ec2, Host: n.host, Now: n.clk.now,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	waitFor(t, "the refused fill", func() bool { return d.State().LastEC2Error != nil })
	cancel()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "filling the warm pool") {
			t.Errorf("Run = %v, want the start-up step that was cut short", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("ipamd did not stop during start-up")
	}
	if n.conflistExists() {
		t.Error("conflist after a stop during start-up")
	}
}

// TestBackoffAfterSubnetExhausted: when the subnet has no address for a new ENI, pods
// retrying their ADDs do not turn into more CreateNetworkInterface calls (the loop waits
// 120 s, as the VPC CNI does).
func TestBackoffAfterSubnetExhausted(t *testing.T) {
	n := newNode(t, pool.Limits{ENIs: 3, IPv4PerENI: 4})
	r := n.start(Knobs{Pool: pool.Config{WarmENITarget: 1}})
	c := r.ready(t)
	n.ec2.setFail("CreateNetworkInterface", cloud.CodeInsufficientSubnet)
	addRetrying(t, c, "p0") // the pool is now short of an ENI
	waitFor(t, "the refused CreateNetworkInterface", func() bool { return n.ec2.count("CreateNetworkInterface") == 1 })
	for i := range 20 {
		if _, err := add(t.Context(), c, fmt.Sprintf("q%d", i)); err != nil && !ipamrpc.IsPoolEmpty(err) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := n.ec2.count("CreateNetworkInterface"); got != 1 {
		t.Errorf("CreateNetworkInterface called %d times during the back-off, want 1", got)
	}
}
