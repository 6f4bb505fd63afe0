package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodejoin/nodejoin/internal/netns"
)

// TestMain removes, before any test starts, the clusters an earlier run of this suite
// left when it was killed (its tests' state directories went with their temporary
// directories, but kubelets' namespaces and mounts stay on the host and would make the
// next `up` of the same name refuse). It uses `nodejoin down --name`, as a user would.
func TestMain(m *testing.M) {
	if names := leftoverClusters(); len(names) > 0 && os.Geteuid() == 0 {
		if err := downLeftovers(names); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: removing clusters an earlier run left: %v\n", err)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}

// instanceNS is the tail nodejoin gives an instance's namespace, or a further
// control-plane node's, after its cluster's name.
var instanceNS = regexp.MustCompile(`-(i-[0-9a-f]{8,17}|cp-[0-9]+)$`)

// leftoverClusters names this suite's clusters ("e2e-…") that the host still holds
// network namespaces or instance roots of.
func leftoverClusters() []string {
	var names []string
	if entries, err := os.ReadDir(netns.Dir); err == nil {
		for _, e := range entries {
			if n, ok := strings.CutPrefix(e.Name(), "nodejoin-"); ok && strings.HasPrefix(n, "e2e-") {
				names = append(names, instanceNS.ReplaceAllString(n, ""))
			}
		}
	}
	if entries, err := os.ReadDir("/var/lib/nodejoin"); err == nil {
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "e2e-") {
				names = append(names, e.Name())
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// downLeftovers builds nodejoin and runs `down --name` for each name.
func downLeftovers(names []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "e2e-sweep")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", dir+"/", "github.com/nodejoin/nodejoin/cmd/nodejoin").CombinedOutput(); err != nil {
		return fmt.Errorf("building nodejoin: %w\n%s", err, out)
	}
	for _, name := range names {
		down := exec.CommandContext(ctx, filepath.Join(dir, "nodejoin"), "down", "--name", name)
		// A state directory of its own: the cluster's is gone, and dir/nodejoin is the binary.
		down.Env = append(os.Environ(), "XDG_STATE_HOME="+filepath.Join(dir, "state"))
		out, err := down.CombinedOutput()
		if err != nil {
			// `down` refuses a cluster whose namespace live processes use: another run's
			// (a benchmark, a developer's cluster), not a leftover. A test of the same
			// name would fail on its own, naming it.
			fmt.Fprintf(os.Stderr, "e2e: left cluster %s alone: nodejoin down --name %s: %v\n%s", name, name, err, out)
			continue
		}
		fmt.Fprintf(os.Stderr, "e2e: an earlier run left cluster %s: %s", name, out)
	}
	return nil
}
