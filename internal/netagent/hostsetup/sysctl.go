package hostsetup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Sysctl is one kernel parameter, by its /proc/sys path ("net/ipv4/ip_forward").
type Sysctl struct {
	Key   string
	Value string
	// Optional parameters are skipped when the kernel does not have them.
	Optional bool
	// Why is shown in logs and docs.
	Why string
}

// Sysctls are the parameters the VPC CNI sets for IPv4 pod networking on the node's
// primary interface.
func Sysctls(primaryInterface string, disableTCPEarlyDemux bool) []Sysctl {
	demux := "1"
	if disableTCPEarlyDemux {
		demux = "0"
	}
	return []Sysctl{
		{Key: "net/ipv4/conf/" + primaryInterface + "/rp_filter", Value: "2",
			Why: "loose reverse-path filtering: replies to pods on secondary ENIs can arrive on another interface than the one their traffic left by"},
		{Key: "net/ipv4/ip_forward", Value: "1",
			Why: "the node routes between pod veths and its ENIs"},
		{Key: "net/ipv4/tcp_early_demux", Value: demux, Optional: true,
			Why: "DISABLE_TCP_EARLY_DEMUX (set it for pods using security groups)"},
	}
}

// ProcSys reads and writes kernel parameters under Root (/proc/sys), in the calling
// process's network namespace.
type ProcSys struct{ Root string }

func (p ProcSys) path(key string) string {
	root := p.Root
	if root == "" {
		root = "/proc/sys"
	}
	return filepath.Join(root, filepath.FromSlash(key))
}

// Get returns a parameter's value.
func (p ProcSys) Get(key string) (string, error) {
	b, err := os.ReadFile(p.path(key))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// Set writes a parameter.
func (p ProcSys) Set(key, value string) error {
	//nolint:gosec // G306: /proc/sys entries keep their own modes.
	return os.WriteFile(p.path(key), []byte(value), 0o644)
}

// ApplySysctls sets each parameter that is not already right; an optional parameter
// the kernel lacks is skipped. It returns the keys it changed.
func ApplySysctls(ps ProcSys, list []Sysctl) ([]string, error) {
	var changed []string
	for _, s := range list {
		cur, err := ps.Get(s.Key)
		if errors.Is(err, os.ErrNotExist) {
			if s.Optional {
				continue
			}
			return changed, fmt.Errorf("kernel parameter %s does not exist: is the interface name right (--primary-interface)?", strings.ReplaceAll(s.Key, "/", "."))
		}
		if err != nil {
			return changed, fmt.Errorf("reading kernel parameter %s: %w", s.Key, err)
		}
		if cur == s.Value {
			continue
		}
		if err := ps.Set(s.Key, s.Value); err != nil {
			return changed, fmt.Errorf("setting kernel parameter %s=%s: %w", strings.ReplaceAll(s.Key, "/", "."), s.Value, err)
		}
		changed = append(changed, s.Key)
	}
	return changed, nil
}
