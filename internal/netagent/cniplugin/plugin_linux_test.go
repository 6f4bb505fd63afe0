package cniplugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"

	"github.com/nodejoin/nodejoin/internal/netagent/ipamrpc"
)

// These tests wire pods in real network namespaces: one plays the instance (the host
// side), others the pods. They need root and never touch the test process's own
// namespace.

func needRoot(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs network namespaces (skipped with -short)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces")
	}
}

// newNetNS creates a network namespace bind-mounted on a file in a test directory and
// removes it when the test ends.
func newNetNS(t *testing.T) ns.NetNS {
	t.Helper()
	path := filepath.Join(t.TempDir(), "netns")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		// The thread is left locked, so Go discards it with its namespace when the
		// goroutine ends.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("unshare: %w", err)
			return
		}
		self := fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid())
		errc <- unix.Mount(self, path, "none", unix.MS_BIND, "")
	}()
	if err := <-errc; err != nil {
		t.Fatalf("creating a network namespace: %v", err)
	}
	netns, err := ns.GetNS(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = netns.Close()
		if err := unix.Unmount(path, unix.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", path, err)
		}
	})
	return netns
}

// newInstance is a namespace playing the instance: lo up, forwarding on, and an eth0
// with the node's primary address, as on a node (a bridge: this kernel may lack the
// dummy link type).
func newInstance(t *testing.T) ns.NetNS {
	t.Helper()
	host := newNetNS(t)
	err := host.Do(func(ns.NetNS) error {
		lo, err := netlinksafe.LinkByName("lo")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(lo); err != nil {
			return err
		}
		eth0 := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}}
		if err := netlink.LinkAdd(eth0); err != nil {
			return err
		}
		if err := netlink.AddrAdd(eth0, &netlink.Addr{IPNet: &net.IPNet{IP: net.ParseIP("198.18.0.11"), Mask: net.CIDRMask(16, 32)}}); err != nil {
			return err
		}
		if err := netlink.LinkSetUp(eth0); err != nil {
			return err
		}
		return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644)
	})
	if err != nil {
		t.Fatalf("setting up the instance namespace: %v", err)
	}
	return host
}

// fakeIPAMD hands out addresses from a list, as ipamd's datastore would, and records
// what it is told.
type fakeIPAMD struct {
	mu       sync.Mutex
	free     []string
	owner    map[string]string
	table    map[string]int // address -> route table; 254 when absent
	released []ipamrpc.DelRequest
}

func newFakeIPAMD(addrs ...string) *fakeIPAMD {
	return &fakeIPAMD{free: addrs, owner: map[string]string{}, table: map[string]int{}}
}

func (f *fakeIPAMD) AddNetwork(_ context.Context, req *ipamrpc.AddRequest) (*ipamrpc.AddReply, error) {
	if err := ipamrpc.CheckVersion(req.ClientVersion); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.free) == 0 {
		return nil, ipamrpc.ErrPoolEmpty
	}
	ip := f.free[0]
	f.free = f.free[1:]
	f.owner[req.ContainerID] = ip
	table := f.table[ip]
	if table == 0 {
		table = 254
	}
	return &ipamrpc.AddReply{IPv4Addr: ip, DeviceNumber: max(table-1, 0) % 253, RouteTableID: table, VPCv4CIDRs: []string{"198.18.0.0/16"}}, nil
}

func (f *fakeIPAMD) DelNetwork(_ context.Context, req *ipamrpc.DelRequest) (*ipamrpc.DelReply, error) {
	if err := ipamrpc.CheckVersion(req.ClientVersion); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released = append(f.released, *req)
	ip, ok := f.owner[req.ContainerID]
	if !ok {
		return &ipamrpc.DelReply{}, nil
	}
	delete(f.owner, req.ContainerID)
	f.free = append(f.free, ip)
	return &ipamrpc.DelReply{IPv4Addr: ip, RouteTableID: 254}, nil
}

func (f *fakeIPAMD) isFree(ip string) bool { //nolint:unparam // callers name the address so each assertion reads on its own
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.free {
		if a == ip {
			return true
		}
	}
	return false
}

func (f *fakeIPAMD) reasons() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.released {
		out = append(out, r.Reason)
	}
	return out
}

// serve serves b on a socket in a temp directory until stop is called or the test ends.
func serve(t *testing.T, b ipamrpc.Backend) (socket string, stop func()) {
	t.Helper()
	socket = filepath.Join(t.TempDir(), "ipamd.sock")
	l, err := ipamrpc.Listen(socket)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ipamrpc.Serve(ctx, l, b) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return socket, stop
}

// env is one test's instance, ipamd and plugin.
type env struct {
	t      *testing.T
	host   ns.NetNS
	socket string
	logDir string
	plugin *Plugin
}

func newEnv(t *testing.T, b ipamrpc.Backend) (*env, func()) {
	needRoot(t)
	socket, stop := serve(t, b)
	return &env{t: t, host: newInstance(t), socket: socket, logDir: t.TempDir(),
		plugin: &Plugin{IPAMDTimeout: 20 * time.Second, Stderr: os.Stderr}}, stop
}

func (e *env) conf(prev []byte) []byte {
	c := map[string]any{
		"cniVersion": "1.0.0", "name": NetworkName, "type": PluginType,
		"ipamdSocket": e.socket, "pluginLogFile": filepath.Join(e.logDir, "plugin.log"),
	}
	if prev != nil {
		c["prevResult"] = json.RawMessage(prev)
	}
	b, err := json.Marshal(c)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

type pod struct {
	name, containerID string
	netns             ns.NetNS
	result            []byte // ADD's output
}

func (e *env) newPod(name string) *pod {
	return &pod{name: name, containerID: "c0ffee" + name, netns: newNetNS(e.t)}
}

func (e *env) args(p *pod, prev []byte) *skel.CmdArgs {
	netns := ""
	if p.netns != nil {
		netns = p.netns.Path()
	}
	return &skel.CmdArgs{
		ContainerID: p.containerID,
		Netns:       netns,
		IfName:      "eth0",
		Args:        "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=" + p.name + ";K8S_POD_INFRA_CONTAINER_ID=" + p.containerID,
		StdinData:   e.conf(prev),
	}
}

// inHost runs f in the instance namespace, as the runtime runs the plugin.
func (e *env) inHost(f func() error) error {
	var ferr error
	if err := e.host.Do(func(ns.NetNS) error { ferr = f(); return nil }); err != nil {
		e.t.Fatal(err)
	}
	return ferr
}

func (e *env) add(p *pod) (*current.Result, error) {
	var out bytes.Buffer
	plugin := *e.plugin
	plugin.Stdout = &out
	if err := e.inHost(func() error { return plugin.Add(e.args(p, nil)) }); err != nil {
		return nil, err
	}
	p.result = out.Bytes()
	r, err := current.NewResult(p.result)
	if err != nil {
		e.t.Fatalf("ADD printed %q: %v", out.String(), err)
	}
	return current.GetResult(r)
}

func (e *env) mustAdd(p *pod) net.IP {
	e.t.Helper()
	res, err := e.add(p)
	if err != nil {
		e.t.Fatalf("ADD %s: %v", p.name, err)
	}
	if len(res.IPs) != 1 || res.IPs[0].Interface == nil || res.Interfaces[*res.IPs[0].Interface].Sandbox != p.netns.Path() {
		e.t.Fatalf("ADD %s result: %s", p.name, p.result)
	}
	return res.IPs[0].Address.IP
}

func (e *env) del(p *pod) error {
	return e.inHost(func() error { return e.plugin.Del(e.args(p, p.result)) })
}

func (e *env) check(p *pod) error {
	return e.inHost(func() error { return e.plugin.Check(e.args(p, p.result)) })
}

func (e *env) hostLinkExists(name string) bool {
	var ok bool
	_ = e.inHost(func() error {
		_, err := netlinksafe.LinkByName(name)
		ok = err == nil
		return nil
	})
	return ok
}

func (e *env) rulesFor(ip net.IP) []netlink.Rule {
	var rules []netlink.Rule
	if err := e.inHost(func() error {
		var err error
		rules, err = podRulesOf(ip)
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return rules
}

func podHasLink(t *testing.T, netns ns.NetNS, name string) bool { //nolint:unparam // callers name the link so each assertion reads on its own
	ok, err := linkExistsIn(netns.Path(), name)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func codeOf(err error) uint {
	var e *types.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// ping sends ICMP echo requests from src in the given namespace to dst until one is
// answered, trying a few times with a generous deadline each.
func ping(netns ns.NetNS, src, dst net.IP) error {
	return netns.Do(func(ns.NetNS) error {
		c, err := icmp.ListenPacket("ip4:icmp", src.String())
		if err != nil {
			return fmt.Errorf("icmp socket: %w", err)
		}
		defer func() { _ = c.Close() }() // the ping is over: a close error changes nothing
		id := os.Getpid() & 0xffff
		var last error
		for seq := 1; seq <= 5; seq++ {
			msg := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: id, Seq: seq, Data: []byte("nodejoin-cni")}}
			b, err := msg.Marshal(nil)
			if err != nil {
				return err
			}
			if _, err := c.WriteTo(b, &net.IPAddr{IP: dst}); err != nil {
				return fmt.Errorf("sending echo to %s: %w", dst, err)
			}
			if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
				return err
			}
			buf := make([]byte, 1500)
			for {
				n, peer, err := c.ReadFrom(buf)
				if err != nil {
					last = err
					break
				}
				m, err := icmp.ParseMessage(1, buf[:n])
				if err != nil || m.Type != ipv4.ICMPTypeEchoReply {
					continue
				}
				if echo, ok := m.Body.(*icmp.Echo); ok && echo.ID == id && echo.Seq == seq && peer.(*net.IPAddr).IP.Equal(dst) {
					return nil
				}
			}
		}
		return fmt.Errorf("no echo reply from %s to %s: %w", dst, src, last)
	})
}

func TestAddPingCheckDel(t *testing.T) {
	ipamd := newFakeIPAMD("198.18.1.5", "198.18.1.6")
	e, _ := newEnv(t, ipamd)
	a, b := e.newPod("pod-a"), e.newPod("pod-b")
	ipA, ipB := e.mustAdd(a), e.mustAdd(b)
	if ipA.String() != "198.18.1.5" || ipB.String() != "198.18.1.6" {
		t.Fatalf("addresses %s, %s; want ipamd's 198.18.1.5, 198.18.1.6", ipA, ipB)
	}

	// Pod to pod through the instance's namespace, and the instance to a pod.
	if err := ping(a.netns, ipA, ipB); err != nil {
		t.Fatalf("pod-a -> pod-b: %v", err)
	}
	if err := ping(b.netns, ipB, ipA); err != nil {
		t.Fatalf("pod-b -> pod-a: %v", err)
	}
	if err := ping(e.host, net.ParseIP("198.18.0.11"), ipA); err != nil {
		t.Fatalf("instance -> pod-a: %v", err)
	}
	for _, p := range []*pod{a, b} {
		if err := e.check(p); err != nil {
			t.Fatalf("CHECK %s right after ADD: %v", p.name, err)
		}
	}

	// The host side is as the VPC CNI makes it.
	veth := hostVethName(DefaultVethPrefix, "default", "pod-a", a.containerID)
	if !strings.HasPrefix(veth, "eni") || len(veth) != 14 || !e.hostLinkExists(veth) {
		t.Fatalf("host veth %q missing", veth)
	}
	if rules := e.rulesFor(ipA); len(rules) != 1 || rules[0].Priority != toPodRulePriority || rules[0].Table != mainTable {
		t.Fatalf("rules for pod-a: %v; want one 'to %s lookup main' at %d", rules, ipA, toPodRulePriority)
	}

	// ADD again for the same attachment is refused without touching the pod or ipamd.
	if _, err := e.add(a); err == nil || codeOf(err) != ErrSetup {
		t.Fatalf("second ADD of pod-a: %v; want an 'already exists' error", err)
	}
	if err := ping(a.netns, ipA, ipB); err != nil {
		t.Fatalf("pod-a lost its network after a refused ADD: %v", err)
	}

	for i := 0; i < 2; i++ {
		if err := e.del(a); err != nil {
			t.Fatalf("DEL pod-a (#%d): %v", i+1, err)
		}
	}
	if e.hostLinkExists(veth) || podHasLink(t, a.netns, "eth0") || len(e.rulesFor(ipA)) != 0 {
		t.Fatal("DEL left the veth, the pod interface or rules behind")
	}
	if !ipamd.isFree("198.18.1.5") {
		t.Fatal("DEL did not give pod-a's address back")
	}
	if err := e.check(a); codeOf(err) != ErrCheck {
		t.Fatalf("CHECK after DEL: %v; want code %d", err, ErrCheck)
	}
	// DEL once the sandbox's namespace is gone.
	if err := e.del(b); err != nil {
		t.Fatal(err)
	}
	b.netns = nil
	if err := e.del(b); err != nil {
		t.Fatalf("DEL without a namespace: %v", err)
	}
	data, err := os.ReadFile(filepath.Join(e.logDir, "plugin.log"))
	if err != nil || !bytes.Contains(data, []byte("added pod network")) || !bytes.Contains(data, []byte("pod=default/pod-a")) {
		t.Fatalf("plugin log: %v\n%s", err, data)
	}
}

// A pod recreated under the same name (a StatefulSet's web-0) gets the same host veth
// name. The runtime's late DEL of the old sandbox, without its namespace, must leave the
// new sandbox's network alone.
func TestLateDelOfAnOldSandboxSparesTheNewOne(t *testing.T) {
	ipamd := newFakeIPAMD("198.18.1.5", "198.18.1.6")
	e, _ := newEnv(t, ipamd)
	old := e.newPod("web-0")
	e.mustAdd(old)
	if err := e.del(old); err != nil {
		t.Fatalf("DEL of the old sandbox: %v", err)
	}
	newer := &pod{name: "web-0", containerID: "c0ffeeweb-0-second", netns: newNetNS(t)}
	ip := e.mustAdd(newer)
	veth := hostVethName(DefaultVethPrefix, "default", "web-0", newer.containerID)
	if veth != hostVethName(DefaultVethPrefix, "default", "web-0", old.containerID) {
		t.Fatal("the two sandboxes' host veths are named apart; this test needs them alike")
	}
	// The runtime's garbage collection of the old sandbox, after its namespace is gone:
	// no namespace and no prevResult, as containerd sends it.
	old.netns, old.result = nil, nil
	for i := range 2 {
		if err := e.del(old); err != nil {
			t.Fatalf("late DEL #%d of the old sandbox: %v", i+1, err)
		}
	}
	if !e.hostLinkExists(veth) {
		t.Fatalf("the late DEL of the old sandbox removed the new sandbox's host veth %s", veth)
	}
	if err := e.check(newer); err != nil {
		t.Fatalf("CHECK of the new sandbox after the old one's late DEL: %v", err)
	}
	if err := ping(e.host, net.ParseIP("198.18.0.11"), ip); err != nil {
		t.Fatalf("instance -> the new sandbox: %v", err)
	}
}

func TestDelWhileIPAMDIsDown(t *testing.T) {
	ipamd := newFakeIPAMD("198.18.1.5")
	e, stop := newEnv(t, ipamd)
	a := e.newPod("pod-a")
	ip := e.mustAdd(a)
	stop()
	if err := e.del(a); err != nil {
		t.Fatalf("DEL with ipamd down: %v; want success (ipamd reclaims later)", err)
	}
	veth := hostVethName(DefaultVethPrefix, "default", "pod-a", a.containerID)
	if e.hostLinkExists(veth) || podHasLink(t, a.netns, "eth0") || len(e.rulesFor(ip)) != 0 {
		t.Fatal("DEL with ipamd down left the pod network behind")
	}
	if err := e.del(a); err != nil {
		t.Fatalf("repeated DEL with ipamd down: %v", err)
	}
}

func TestPoolEmptyIsTryAgainLater(t *testing.T) {
	ipamd := newFakeIPAMD("198.18.1.5")
	e, _ := newEnv(t, ipamd)
	a, b := e.newPod("pod-a"), e.newPod("pod-b")
	e.mustAdd(a)
	_, err := e.add(b)
	if codeOf(err) != types.ErrTryAgainLater {
		t.Fatalf("ADD with the pool empty: %v; want code 11", err)
	}
	if !strings.Contains(err.Error(), "default/pod-b") || !strings.Contains(err.Error(), "warm pool") {
		t.Fatalf("error %q should name the pod and the pool", err)
	}
	if podHasLink(t, b.netns, "eth0") {
		t.Fatal("a failed ADD left an interface in the pod")
	}
	// The address frees and the retry succeeds.
	if err := e.del(a); err != nil {
		t.Fatal(err)
	}
	if got := e.mustAdd(b); got.String() != "198.18.1.5" {
		t.Fatalf("retried ADD got %s", got)
	}
}

func TestIPAMDUnreachableIsTryAgainLater(t *testing.T) {
	e, stop := newEnv(t, newFakeIPAMD("198.18.1.5"))
	stop()
	_, err := e.add(e.newPod("pod-a"))
	if codeOf(err) != types.ErrTryAgainLater || !strings.Contains(err.Error(), e.socket) {
		t.Fatalf("ADD with ipamd down: %v; want code 11 naming the socket", err)
	}
}

func TestAddWithoutNamespace(t *testing.T) {
	ipamd := newFakeIPAMD("198.18.1.5")
	e, _ := newEnv(t, ipamd)
	a := e.newPod("pod-a")
	args := e.args(a, nil)
	args.Netns = filepath.Join(t.TempDir(), "gone")
	err := e.inHost(func() error { return e.plugin.Add(args) })
	if codeOf(err) != types.ErrInvalidNetNS || !strings.Contains(err.Error(), "default/pod-a") {
		t.Fatalf("ADD into a missing namespace: %v; want code %d naming the pod", err, types.ErrInvalidNetNS)
	}
	if !ipamd.isFree("198.18.1.5") || len(ipamd.reasons()) != 0 {
		t.Fatal("ADD into a missing namespace took an address")
	}
}

func TestSetupFailureRollsBack(t *testing.T) {
	ipamd := newFakeIPAMD("198.18.1.5")
	e, _ := newEnv(t, ipamd)
	a := e.newPod("pod-a")
	// Something that is not ours holds the host veth's name.
	veth := hostVethName(DefaultVethPrefix, "default", "pod-a", a.containerID)
	if err := e.inHost(func() error {
		return netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: veth}})
	}); err != nil {
		t.Fatal(err)
	}
	_, err := e.add(a)
	if codeOf(err) != ErrSetup || !strings.Contains(err.Error(), "not a veth") || !strings.Contains(err.Error(), "default/pod-a") {
		t.Fatalf("ADD over a foreign link: %v", err)
	}
	if !ipamd.isFree("198.18.1.5") {
		t.Fatal("the address was not given back after the failed setup")
	}
	if r := ipamd.reasons(); len(r) != 1 || r[0] != ReasonSetupNSFailed {
		t.Fatalf("ipamd was told %v; want one %s", r, ReasonSetupNSFailed)
	}
	if podHasLink(t, a.netns, "eth0") || len(e.rulesFor(net.ParseIP("198.18.1.5"))) != 0 {
		t.Fatal("the failed setup left pieces behind")
	}
	if !e.hostLinkExists(veth) {
		t.Fatal("rollback removed a link that was not the plugin's")
	}
}

func TestCheckDetectsDrift(t *testing.T) {
	ipamd := newFakeIPAMD("198.18.1.5", "198.18.2.7")
	ipamd.table["198.18.2.7"] = 3 // on the ENI with device number 2
	e, _ := newEnv(t, ipamd)

	a := e.newPod("pod-a")
	ipA := e.mustAdd(a)
	veth := hostVethName(DefaultVethPrefix, "default", "pod-a", a.containerID)
	if err := e.check(a); err != nil {
		t.Fatal(err)
	}
	// The host route to the pod goes.
	if err := e.inHost(func() error {
		link, err := netlinksafe.LinkByName(veth)
		if err != nil {
			return err
		}
		return netlink.RouteDel(&netlink.Route{LinkIndex: link.Attrs().Index, Dst: &net.IPNet{IP: ipA, Mask: net.CIDRMask(32, 32)}, Scope: netlink.SCOPE_LINK})
	}); err != nil {
		t.Fatal(err)
	}
	if err := e.check(a); codeOf(err) != ErrCheck || !strings.Contains(err.Error(), "host route") {
		t.Fatalf("CHECK after removing the host route: %v", err)
	}

	// A pod on a secondary ENI also has a rule to its ENI's table.
	b := e.newPod("pod-b")
	ipB := e.mustAdd(b)
	rules := e.rulesFor(ipB)
	var from *netlink.Rule
	for i := range rules {
		if rules[i].Priority == fromPodRulePriority {
			from = &rules[i]
		}
	}
	if len(rules) != 2 || from == nil || from.Table != 3 {
		t.Fatalf("rules for pod-b: %v; want 'to' at %d and 'from lookup 3' at %d", rules, toPodRulePriority, fromPodRulePriority)
	}
	if err := e.check(b); err != nil {
		t.Fatal(err)
	}
	if err := e.inHost(func() error { return netlink.RuleDel(from) }); err != nil {
		t.Fatal(err)
	}
	if err := e.check(b); codeOf(err) != ErrCheck || !strings.Contains(err.Error(), "rule") {
		t.Fatalf("CHECK after removing the ENI rule: %v", err)
	}
	// The pod's default route goes.
	if err := e.inHost(func() error { return netlink.RuleAdd(from) }); err != nil {
		t.Fatal(err)
	}
	if err := b.netns.Do(func(ns.NetNS) error {
		link, err := netlinksafe.LinkByName("eth0")
		if err != nil {
			return err
		}
		return netlink.RouteDel(&netlink.Route{LinkIndex: link.Attrs().Index, Dst: defaultNet, Gw: gateway})
	}); err != nil {
		t.Fatal(err)
	}
	if err := e.check(b); codeOf(err) != ErrCheck || !strings.Contains(err.Error(), "default route") {
		t.Fatalf("CHECK after removing the pod's default route: %v", err)
	}
	if err := e.del(b); err != nil {
		t.Fatal(err)
	}
	if len(e.rulesFor(ipB)) != 0 {
		t.Fatal("DEL left pod-b's rules behind")
	}
}

func TestStatus(t *testing.T) {
	e, stop := newEnv(t, newFakeIPAMD())
	args := &skel.CmdArgs{StdinData: e.conf(nil)}
	if err := e.plugin.Status(args); err != nil {
		t.Fatalf("STATUS with ipamd serving: %v", err)
	}
	stop()
	if err := e.plugin.Status(args); codeOf(err) != types.ErrPluginNotAvailable {
		t.Fatalf("STATUS with ipamd down: %v; want code %d", err, types.ErrPluginNotAvailable)
	}
}

// TestRuntimeRunsTheChain drives the built plugin binary the way containerd does,
// through libcni with the conflist ipamd writes: nodejoin-cni, then portmap, plus the
// loopback plugin for lo. The reference plugins come from bin/ (make tools).
func TestRuntimeRunsTheChain(t *testing.T) {
	needRoot(t)
	pluginDir := t.TempDir()
	for _, p := range []string{"loopback", "portmap"} {
		src, err := filepath.Abs(filepath.Join("../../../bin", p))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(src); err != nil {
			t.Skipf("%s is not built (make tools): %v", p, err)
		}
		if err := os.Symlink(src, filepath.Join(pluginDir, p)); err != nil {
			t.Fatal(err)
		}
	}
	build := exec.CommandContext(t.Context(), "go", "build", "-o", filepath.Join(pluginDir, PluginType), "../../../cmd/nodejoin-cni")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", PluginType, err, out)
	}

	ipamd := newFakeIPAMD("198.18.1.5")
	e, _ := newEnv(t, ipamd)
	raw, err := ConflistJSON(ConflistOptions{IPAMDSocket: e.socket, PluginLogFile: filepath.Join(e.logDir, "plugin.log")})
	if err != nil {
		t.Fatal(err)
	}
	list, err := libcni.ConfListFromBytes(raw)
	if err != nil {
		t.Fatal(err)
	}
	lo, err := libcni.NetworkPluginConfFromBytes([]byte(`{"cniVersion":"1.0.0","name":"cni-loopback","type":"loopback"}`))
	if err != nil {
		t.Fatal(err)
	}
	cniRuntime := libcni.NewCNIConfigWithCacheDir([]string{pluginDir}, t.TempDir(), nil)
	pod := e.newPod("web-0")
	rt := &libcni.RuntimeConf{ContainerID: pod.containerID, NetNS: pod.netns.Path(), IfName: "eth0",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", "web-0"}, {"K8S_POD_INFRA_CONTAINER_ID", pod.containerID}}}
	loRT := *rt
	loRT.IfName = "lo"
	ctx := t.Context()

	var added types.Result
	err = e.inHost(func() error {
		if _, err := cniRuntime.AddNetwork(ctx, lo, &loRT); err != nil {
			return fmt.Errorf("loopback ADD: %w", err)
		}
		if added, err = cniRuntime.AddNetworkList(ctx, list, rt); err != nil {
			return fmt.Errorf("ADD: %w", err)
		}
		return cniRuntime.CheckNetworkList(ctx, list, rt)
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := current.GetResult(added)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.IPs) != 1 || res.IPs[0].Address.String() != "198.18.1.5/32" {
		t.Fatalf("the chain's result %+v; want 198.18.1.5/32 from ipamd", res)
	}
	if err := ping(pod.netns, net.ParseIP("198.18.1.5"), net.ParseIP("198.18.1.5")); err != nil {
		t.Fatalf("the pod cannot reach itself over lo: %v", err)
	}
	if err := ping(e.host, net.ParseIP("198.18.0.11"), net.ParseIP("198.18.1.5")); err != nil {
		t.Fatalf("the instance cannot reach the pod: %v", err)
	}
	for i := 0; i < 2; i++ {
		if err := e.inHost(func() error { return cniRuntime.DelNetworkList(ctx, list, rt) }); err != nil {
			t.Fatalf("DEL #%d: %v", i+1, err)
		}
	}
	if !ipamd.isFree("198.18.1.5") || podHasLink(t, pod.netns, "eth0") {
		t.Fatal("DEL through the runtime did not free the address and remove the interface")
	}
}
