package cniplugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodejoin/nodejoin/internal/netagent/ipamrpc"
)

// Error codes of this plugin (the CNI spec leaves 100 and up to plugins).
const (
	// ErrIPAMD: ipamd refused or failed the request for a reason retrying will not fix.
	ErrIPAMD uint = 100
	// ErrSetup: wiring the pod's network (veth, address, routes, rules) failed.
	ErrSetup uint = 101
	// ErrCheck: CHECK found the pod's network differing from what ADD made.
	ErrCheck uint = 102
)

// Reasons the plugin gives ipamd when it releases an address.
const (
	ReasonPodDeleted    = "PodDeleted"
	ReasonSetupNSFailed = "SetupNSFailed"
)

// tableIfPrefix names the result's third interface entry, which records the ENI route
// table of the pod's address so that CHECK can verify the pod's rule and DEL needs no
// ipamd. It has no sandbox and no addresses, and no such link exists (the VPC CNI keeps
// the same record in a "dummy" interface entry).
const tableIfPrefix = "vpc-route-table-"

// SupportedVersions are the CNI spec versions the plugin speaks.
var SupportedVersions = version.PluginSupports("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")

// Plugin runs the CNI commands against ipamd. The zero value is ready to use.
type Plugin struct {
	// IPAMDTimeout bounds each call to ipamd; zero means 30 seconds.
	IPAMDTimeout time.Duration
	// Stdout receives the ADD result; nil means os.Stdout.
	Stdout io.Writer
	// Stderr receives log lines when the plugin log file cannot be opened; nil means os.Stderr.
	Stderr io.Writer
}

// Funcs are the plugin's commands, for skel.PluginMainFuncs.
func (p *Plugin) Funcs() skel.CNIFuncs {
	return skel.CNIFuncs{Add: p.Add, Del: p.Del, Check: p.Check, Status: p.Status}
}

func (p *Plugin) timeout() time.Duration {
	if p.IPAMDTimeout > 0 {
		return p.IPAMDTimeout
	}
	return 30 * time.Second
}

func (p *Plugin) stdout() io.Writer {
	if p.Stdout != nil {
		return p.Stdout
	}
	return os.Stdout
}

func (p *Plugin) stderr() io.Writer {
	if p.Stderr != nil {
		return p.Stderr
	}
	return os.Stderr
}

// k8sArgs are the CNI_ARGS the kubelet's runtime passes.
type k8sArgs struct {
	types.CommonArgs
	K8S_POD_NAME               types.UnmarshallableString //nolint:revive // names fixed by the runtime
	K8S_POD_NAMESPACE          types.UnmarshallableString //nolint:revive // names fixed by the runtime
	K8S_POD_INFRA_CONTAINER_ID types.UnmarshallableString //nolint:revive // names fixed by the runtime
	K8S_POD_UID                types.UnmarshallableString //nolint:revive // names fixed by the runtime
}

// invocation is what every command starts from.
type invocation struct {
	conf *NetConf
	k8s  k8sArgs
	// pod names the pod in messages: namespace/name, or the container ID outside Kubernetes.
	pod string
	log *slog.Logger
}

func (p *Plugin) begin(command string, args *skel.CmdArgs) (*invocation, func(), error) {
	conf, err := LoadNetConf(args.StdinData)
	if err != nil {
		return nil, nil, types.NewError(types.ErrInvalidNetworkConfig, err.Error(), "")
	}
	inv := &invocation{conf: conf}
	inv.k8s.IgnoreUnknown = true
	if err := types.LoadArgs(args.Args, &inv.k8s); err != nil {
		return nil, nil, types.NewError(types.ErrInvalidEnvironmentVariables,
			fmt.Sprintf("CNI_ARGS of container %s: %v", shortID(args.ContainerID), err), "")
	}
	inv.pod = "container " + shortID(args.ContainerID)
	if name := string(inv.k8s.K8S_POD_NAME); name != "" {
		inv.pod = string(inv.k8s.K8S_POD_NAMESPACE) + "/" + name
	}
	log, closeLog := openLog(conf.PluginLogFile, conf.PluginLogLevel, p.stderr())
	inv.log = log.With("command", command, "containerID", args.ContainerID, "pod", inv.pod,
		"netns", args.Netns, "ifName", args.IfName)
	return inv, closeLog, nil
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func (inv *invocation) hostVeth(containerID string) string {
	return hostVethName(inv.conf.VethPrefix, string(inv.k8s.K8S_POD_NAMESPACE), string(inv.k8s.K8S_POD_NAME), containerID)
}

// Add gives the pod an address from ipamd and wires it in. If wiring fails the address
// goes back to ipamd (Reason SetupNSFailed) before the error is returned.
func (p *Plugin) Add(args *skel.CmdArgs) error {
	inv, closeLog, err := p.begin("ADD", args)
	if err != nil {
		return err
	}
	defer closeLog()
	log, conf := inv.log, inv.conf
	log.Debug("adding pod network")

	// The interface must not exist yet. Checking before an address is taken means a
	// repeated ADD cannot roll back, and so free, a running sandbox's address.
	exists, err := linkExistsIn(args.Netns, args.IfName)
	if err != nil {
		if netnsGone(err) {
			return types.NewError(types.ErrInvalidNetNS, fmt.Sprintf("network namespace %q of pod %s does not exist: the runtime removed or never created the sandbox", args.Netns, inv.pod), err.Error())
		}
		return types.NewError(ErrSetup, fmt.Sprintf("inspecting the network namespace of pod %s", inv.pod), err.Error())
	}
	if exists {
		return types.NewError(ErrSetup, fmt.Sprintf("interface %s already exists in the network namespace of pod %s: the runtime must DEL the attachment before another ADD", args.IfName, inv.pod), "")
	}

	client, err := ipamrpc.Dial(conf.IPAMDSocket)
	if err != nil {
		return ipamdError(inv.pod, conf.IPAMDSocket, err)
	}
	defer func() { _ = client.Close() }() // the call is done: a close error changes nothing
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout())
	defer cancel()
	reply, err := client.AddNetwork(ctx, &ipamrpc.AddRequest{
		PodName:      string(inv.k8s.K8S_POD_NAME),
		PodNamespace: string(inv.k8s.K8S_POD_NAMESPACE),
		PodUID:       string(inv.k8s.K8S_POD_UID),
		ContainerID:  args.ContainerID,
		IfName:       args.IfName,
		NetworkName:  conf.Name,
		Netns:        args.Netns,
	})
	if err != nil {
		log.Warn("ipamd gave no address", "err", err)
		return ipamdError(inv.pod, conf.IPAMDSocket, err)
	}

	pn := podNetwork{
		HostVeth: inv.hostVeth(args.ContainerID),
		IfName:   args.IfName,
		Netns:    args.Netns,
		IP:       net.ParseIP(reply.IPv4Addr).To4(),
		Table:    reply.RouteTableID,
		MTU:      conf.MTUValue(),
	}
	if reply.MTU > 0 {
		pn.MTU = reply.MTU
	}
	if pn.Table == 0 {
		pn.Table = mainTable
	}
	log = log.With("ip", reply.IPv4Addr, "hostVeth", pn.HostVeth, "table", pn.Table, "device", reply.DeviceNumber)

	var hostIf, podIf net.Interface
	if pn.IP == nil {
		err = fmt.Errorf("ipamd answered with %q, not an IPv4 address", reply.IPv4Addr)
	} else {
		hostIf, podIf, err = setup(pn)
	}
	if err != nil {
		log.Error("pod network setup failed; rolling back", "err", err)
		if terr := teardown(pn.IP, args.Netns, args.IfName); terr != nil {
			log.Error("rollback left pieces of the pod network behind", "err", terr)
		}
		rctx, rcancel := context.WithTimeout(context.Background(), p.timeout())
		defer rcancel()
		if _, derr := client.DelNetwork(rctx, &ipamrpc.DelRequest{
			PodName:      string(inv.k8s.K8S_POD_NAME),
			PodNamespace: string(inv.k8s.K8S_POD_NAMESPACE),
			PodUID:       string(inv.k8s.K8S_POD_UID),
			ContainerID:  args.ContainerID,
			IfName:       args.IfName,
			NetworkName:  conf.Name,
			Reason:       ReasonSetupNSFailed,
		}); derr != nil {
			log.Error("rollback: ipamd did not take the address back; it reclaims it when it reconciles", "err", derr)
		}
		return types.NewError(ErrSetup, fmt.Sprintf("setting up the network of pod %s failed and was rolled back (address %s returned to ipamd); the runtime retries the sandbox, and the plugin log %s has the steps", inv.pod, reply.IPv4Addr, conf.PluginLogFile), err.Error())
	}

	result := &current.Result{
		CNIVersion: current.ImplementedSpecVersion,
		Interfaces: []*current.Interface{
			{Name: hostIf.Name, Mac: hostIf.HardwareAddr.String()},
			{Name: podIf.Name, Mac: podIf.HardwareAddr.String(), Sandbox: args.Netns, Mtu: pn.MTU},
			{Name: tableIfPrefix + strconv.Itoa(pn.Table)},
		},
		IPs: []*current.IPConfig{{
			Address:   *pn.host32(),
			Gateway:   gateway,
			Interface: current.Int(1),
		}},
		Routes: []*types.Route{{Dst: *defaultNet, GW: gateway}},
	}
	out, err := result.GetAsVersion(conf.CNIVersion)
	if err != nil {
		return types.NewError(types.ErrIncompatibleCNIVersion, fmt.Sprintf("converting the result for pod %s to cniVersion %s", inv.pod, conf.CNIVersion), err.Error())
	}
	log.Info("added pod network")
	return out.PrintTo(p.stdout())
}

// Del tears the pod's network down and gives its address back. It is best effort and
// idempotent: a missing namespace or interface is success, and when ipamd is unreachable
// the plugin still tears down from prevResult and returns success (ipamd reclaims the
// address when it reconciles), because a runtime need not retry a failed DEL.
func (p *Plugin) Del(args *skel.CmdArgs) error {
	inv, closeLog, err := p.begin("DEL", args)
	if err != nil {
		return err
	}
	defer closeLog()
	log, conf := inv.log, inv.conf
	log.Debug("deleting pod network")

	// Tear down first, from what ADD reported, so that the address has no routes left
	// when ipamd may hand it to another pod.
	pn := podNetwork{HostVeth: inv.hostVeth(args.ContainerID), IfName: args.IfName, Netns: args.Netns}
	if conf.PrevResult != nil {
		if prev, err := podFromResult(conf.PrevResult, args.IfName); err == nil {
			pn.HostVeth, pn.IP = prev.HostVeth, prev.IP
		} else {
			log.Warn("prevResult does not describe this attachment; tearing down by name", "err", err)
		}
	}
	tdErr := teardown(pn.IP, args.Netns, args.IfName)

	client, err := ipamrpc.Dial(conf.IPAMDSocket)
	if err == nil {
		defer func() { _ = client.Close() }() // the call is done: a close error changes nothing
		ctx, cancel := context.WithTimeout(context.Background(), p.timeout())
		defer cancel()
		var reply *ipamrpc.DelReply
		reply, err = client.DelNetwork(ctx, &ipamrpc.DelRequest{
			PodName:      string(inv.k8s.K8S_POD_NAME),
			PodNamespace: string(inv.k8s.K8S_POD_NAMESPACE),
			PodUID:       string(inv.k8s.K8S_POD_UID),
			ContainerID:  args.ContainerID,
			IfName:       args.IfName,
			NetworkName:  conf.Name,
			Reason:       ReasonPodDeleted,
		})
		if err == nil {
			released := net.ParseIP(reply.IPv4Addr).To4()
			log.Info("deleted pod network", "ip", reply.IPv4Addr, "hostVeth", pn.HostVeth)
			// Without prevResult the rules could not be found before; the address is
			// known now.
			if released != nil && !released.Equal(pn.IP) {
				tdErr = errors.Join(tdErr, removeRules(released))
			}
		}
	}
	if err != nil {
		log.Warn("ipamd did not release the address; it reclaims it when it reconciles", "err", err)
	}
	if tdErr != nil {
		log.Error("tearing down the pod network failed", "err", tdErr)
		return types.NewError(ErrSetup, fmt.Sprintf("tearing down the network of pod %s failed; the runtime retries DEL", inv.pod), tdErr.Error())
	}
	return nil
}

// Check verifies the pod's network against prevResult: the veth pair, the address, the
// pod's routes and ARP entry, the host route and the policy rules.
func (p *Plugin) Check(args *skel.CmdArgs) error {
	inv, closeLog, err := p.begin("CHECK", args)
	if err != nil {
		return err
	}
	defer closeLog()
	if inv.conf.PrevResult == nil {
		return types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf("CHECK of pod %s: the runtime passed no prevResult to check against", inv.pod), "")
	}
	pn, err := podFromResult(inv.conf.PrevResult, args.IfName)
	if err != nil {
		return types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf("CHECK of pod %s: prevResult was not made by %s", inv.pod, PluginType), err.Error())
	}
	pn.Netns = args.Netns
	if err := check(pn); err != nil {
		inv.log.Warn("pod network differs from prevResult", "err", err)
		return types.NewError(ErrCheck, fmt.Sprintf("the network of pod %s is not as ADD made it; delete the pod so that it gets a new sandbox", inv.pod), err.Error())
	}
	inv.log.Debug("pod network checked")
	return nil
}

// Status reports whether pods can be added: ipamd's health service must say SERVING.
func (p *Plugin) Status(args *skel.CmdArgs) error {
	inv, closeLog, err := p.begin("STATUS", args)
	if err != nil {
		return err
	}
	defer closeLog()
	socket := inv.conf.IPAMDSocket
	client, err := ipamrpc.Dial(socket)
	if err == nil {
		defer func() { _ = client.Close() }() // the call is done: a close error changes nothing
		ctx, cancel := context.WithTimeout(context.Background(), min(p.timeout(), 10*time.Second))
		defer cancel()
		err = client.Healthy(ctx)
	}
	if err != nil {
		inv.log.Warn("ipamd is not serving", "err", err)
		return types.NewError(types.ErrPluginNotAvailable, fmt.Sprintf("ipamd on %s is not serving, so no pod can get an address: check the aws-node pod on this node (kubectl -n kube-system get pods -l k8s-app=aws-node -o wide)", socket), err.Error())
	}
	return nil
}

// ipamdError maps an ipamd failure to a CNI error naming the pod and the fix.
func ipamdError(pod, socket string, err error) *types.Error {
	switch status.Code(err) {
	case codes.ResourceExhausted:
		return types.NewError(types.ErrTryAgainLater, fmt.Sprintf("no free IPv4 address for pod %s: ipamd's warm pool on this node is empty; the runtime retries while ipamd assigns more addresses, unless the node is at its instance type's ENI limit (then lower the pods per node or use a larger instance type)", pod), status.Convert(err).Message())
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return types.NewError(types.ErrTryAgainLater, fmt.Sprintf("ipamd on %s did not answer for pod %s: the runtime retries; if it persists check the aws-node pod on this node (kubectl -n kube-system get pods -l k8s-app=aws-node -o wide)", socket, pod), err.Error())
	case codes.FailedPrecondition:
		return types.NewError(ErrIPAMD, fmt.Sprintf("ipamd refused pod %s: %s", pod, status.Convert(err).Message()), "")
	}
	return types.NewError(ErrIPAMD, fmt.Sprintf("ipamd failed the request for pod %s (its log: kubectl -n kube-system logs -c aws-node on this node's aws-node pod)", pod), err.Error())
}

// podFromResult reads back what ADD reported for ifName: the pod's address, the host
// veth and the ENI route table.
func podFromResult(r types.Result, ifName string) (podNetwork, error) {
	res, err := current.NewResultFromResult(r)
	if err != nil {
		return podNetwork{}, fmt.Errorf("converting prevResult: %w", err)
	}
	pn := podNetwork{IfName: ifName, Table: mainTable}
	podIdx := -1
	for i, itf := range res.Interfaces {
		switch {
		case itf.Sandbox != "" && itf.Name == ifName:
			podIdx = i
		case strings.HasPrefix(itf.Name, tableIfPrefix):
			t, err := strconv.Atoi(strings.TrimPrefix(itf.Name, tableIfPrefix))
			if err != nil {
				return podNetwork{}, fmt.Errorf("interface entry %q: %w", itf.Name, err)
			}
			pn.Table = t
		case itf.Sandbox == "" && pn.HostVeth == "":
			pn.HostVeth = itf.Name
		}
	}
	if podIdx < 0 {
		return podNetwork{}, fmt.Errorf("no interface %s in a sandbox", ifName)
	}
	if pn.HostVeth == "" {
		return podNetwork{}, errors.New("no host interface")
	}
	for _, c := range res.IPs {
		if c.Interface != nil && *c.Interface == podIdx && c.Address.IP.To4() != nil {
			pn.IP = c.Address.IP.To4()
			break
		}
	}
	if pn.IP == nil {
		return podNetwork{}, fmt.Errorf("no IPv4 address on %s", ifName)
	}
	return pn, nil
}
