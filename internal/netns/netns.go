// Package netns manages the network namespaces that hold a local cluster: it creates and
// deletes them with iproute2, runs commands inside them, dials into them from the host,
// and forwards a loopback port of the host into them.
//
// Nothing here adds an address, route or interface to the host's own namespace.
package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Dir is where iproute2 keeps named network namespaces.
const Dir = "/run/netns"

// ErrNotFound reports that a named namespace does not exist.
var ErrNotFound = errors.New("network namespace not found")

// NS is a named network namespace.
type NS struct {
	Name string
}

// Path is the namespace's file, which setns and nsenter take.
func (n NS) Path() string { return filepath.Join(Dir, n.Name) }

// Exists reports whether the namespace is there.
func (n NS) Exists() bool {
	_, err := os.Stat(n.Path())
	return err == nil
}

// Create makes a new named namespace and brings its loopback interface up. It fails if
// a namespace of that name exists already.
func Create(ctx context.Context, name string) (NS, error) {
	ns := NS{Name: name}
	if ns.Exists() {
		return ns, fmt.Errorf("network namespace %s exists already (left over from an earlier run? remove it with: ip netns delete %s)", name, name)
	}
	if err := ip(ctx, "netns", "add", name); err != nil {
		return ns, err
	}
	if err := ns.IP(ctx, "link", "set", "lo", "up"); err != nil {
		_ = Delete(ctx, name)
		return ns, err
	}
	return ns, nil
}

// Delete removes a named namespace; a missing namespace is not an error.
func Delete(ctx context.Context, name string) error {
	if !(NS{Name: name}).Exists() {
		return nil
	}
	return ip(ctx, "netns", "delete", name)
}

// Users returns the PIDs of the processes whose network namespace is this one.
func (n NS) Users() ([]int, error) {
	var st unix.Stat_t
	if err := unix.Stat(n.Path(), &st); err != nil {
		return nil, fmt.Errorf("network namespace %s: %w", n.Name, err)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var ps unix.Stat_t
		if unix.Stat(filepath.Join("/proc", e.Name(), "ns", "net"), &ps) == nil && ps.Dev == st.Dev && ps.Ino == st.Ino {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// IP runs an iproute2 command inside the namespace.
func (n NS) IP(ctx context.Context, args ...string) error {
	return ip(ctx, append([]string{"-n", n.Name}, args...)...)
}

// IPOutput runs an iproute2 command inside the namespace and returns its output.
func (n NS) IPOutput(ctx context.Context, args ...string) ([]byte, error) {
	return output(ctx, "ip", append([]string{"-n", n.Name}, args...)...)
}

// Bridge runs an iproute2 bridge command (fdb, link) inside the namespace.
func (n NS) Bridge(ctx context.Context, args ...string) error {
	_, err := output(ctx, "bridge", append([]string{"-n", n.Name}, args...)...)
	return err
}

// BridgeOutput runs an iproute2 bridge command inside the namespace and returns its output.
func (n NS) BridgeOutput(ctx context.Context, args ...string) ([]byte, error) {
	return output(ctx, "bridge", append([]string{"-n", n.Name}, args...)...)
}

// AddBridge creates a bridge inside the namespace, gives it addr (an address with its
// prefix, such as 198.18.0.1/24) and brings it up.
func (n NS) AddBridge(ctx context.Context, bridge string, addr netip.Prefix) error {
	if err := n.IP(ctx, "link", "add", bridge, "type", "bridge"); err != nil {
		return err
	}
	if err := n.IP(ctx, "addr", "add", addr.String(), "dev", bridge); err != nil {
		return err
	}
	return n.IP(ctx, "link", "set", bridge, "up")
}

// Wrap returns argv that runs argv inside the namespace. Only the network namespace is
// entered: `ip netns exec` would also remount /sys, which breaks the kubelet's cgroup
// discovery.
func (n NS) Wrap(argv []string) []string {
	return append([]string{"nsenter", "--net=" + n.Path(), "--"}, argv...)
}

// DialContext connects to addr from inside the namespace. The socket is created on an
// OS thread that has temporarily entered the namespace, so it belongs to it for life.
func (n NS) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	var conn net.Conn
	err := n.do(func() error {
		var err error
		conn, err = d.DialContext(ctx, network, addr)
		return err
	})
	return conn, err
}

// Listen opens a listener inside the namespace, so that servers of the host process
// (such as an instance's metadata endpoint) can serve only that namespace.
func (n NS) Listen(network, addr string) (net.Listener, error) {
	var l net.Listener
	err := n.do(func() error {
		var err error
		var lc net.ListenConfig
		l, err = lc.Listen(context.Background(), network, addr)
		return err
	})
	return l, err
}

// do runs fn on a locked OS thread that is inside the namespace.
func (n NS) do(fn func() error) error {
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("opening current network namespace: %w", err)
	}
	defer func() { _ = orig.Close() }()
	target, err := os.Open(n.Path())
	if err != nil {
		runtime.UnlockOSThread()
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%w: %s", ErrNotFound, n.Name)
		}
		return fmt.Errorf("opening network namespace %s: %w", n.Name, err)
	}
	defer func() { _ = target.Close() }()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("entering network namespace %s: %w", n.Name, err)
	}
	fnErr := fn()
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		// The thread is stuck in the wrong namespace: leave it locked so that the
		// runtime discards it when this goroutine ends, instead of reusing it.
		return fmt.Errorf("returning from network namespace %s: %w", n.Name, err)
	}
	runtime.UnlockOSThread()
	return fnErr
}

func ip(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, "ip", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

func output(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// CheckHostOverlap fails when prefix overlaps an address of any interface in the host's
// namespace: addresses nodejoin gives out inside its namespaces must never shadow the
// host's own network.
func CheckHostOverlap(prefix netip.Prefix) error {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return fmt.Errorf("listing host addresses: %w", err)
	}
	return checkOverlap(prefix, addrs)
}

func checkOverlap(prefix netip.Prefix, addrs []net.Addr) error {
	for _, a := range addrs {
		ipnet, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		hostPrefix, err := netip.ParsePrefix(ipnet.String())
		if err != nil {
			continue
		}
		if hostPrefix.Addr().IsLoopback() {
			continue
		}
		if hostPrefix.Masked().Overlaps(prefix) {
			return fmt.Errorf("node network %s overlaps the host's network %s: choose another range with --node-cidr", prefix, hostPrefix.Masked())
		}
	}
	return nil
}
