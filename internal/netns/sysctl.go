package netns

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Sysctl sets a network sysctl (such as net.ipv4.ip_forward) inside the namespace:
// /proc/sys/net shows the network namespace of the thread that opens it, so the file
// is written from a thread inside the namespace. Only net.* keys are per namespace.
func (n NS) Sysctl(key, value string) error {
	if !strings.HasPrefix(key, "net.") {
		return fmt.Errorf("sysctl %s: only net.* settings belong to a network namespace", key)
	}
	path := filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/"))
	return n.do(func() error {
		if err := os.WriteFile(path, []byte(value+"\n"), 0o600); err != nil {
			return fmt.Errorf("setting %s=%s in network namespace %s: %w", key, value, n.Name, err)
		}
		return nil
	})
}
