package instance

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/nodejoin/nodejoin/internal/netns"
)

// instanceRootName is how nextRoot names an instance's root under the cluster's base.
var instanceRootName = regexp.MustCompile(`^n[0-9]+$`)

// instanceIDPattern is the tail of an instance's namespace name after the cluster's
// "nodejoin-<cluster>-": an EC2 instance ID. Matching the whole tail keeps cluster "a"
// off cluster "a-i"'s namespaces ("nodejoin-a-i-i-…" leaves "i-i-…", not an ID).
var instanceIDPattern = regexp.MustCompile(`^i-[0-9a-f]{8,17}$`)

// orphans returns records for the real instances of cluster that the host still holds
// but no record in recs names: roots under the cluster's base and network namespaces
// named after the cluster. They are what a `nodejoin up` leaves when its state
// directory went before its instances did (a test's temporary directory removed after
// the run was killed), and `down --name` would otherwise report the cluster removed
// while its kubelets' mounts and namespaces stayed, making the next `up` of that name
// fail. Each record carries one of root or namespace, which is all cleanupInstance
// needs to stop what runs there and remove it.
func orphans(cluster string, recs []*Record) []*Record {
	return orphansIn(RootBase(cluster), netns.Dir, cluster, recs)
}

// orphansIn is orphans with the cluster's root base and the namespaces' directory given.
func orphansIn(base, nsDir, cluster string, recs []*Record) []*Record {
	known := map[string]bool{}
	for _, r := range recs {
		known[r.Root], known[r.Namespace] = true, true
	}
	var found []*Record
	if entries, err := os.ReadDir(base); err == nil {
		for _, e := range entries {
			root := filepath.Join(base, e.Name())
			if e.IsDir() && instanceRootName.MatchString(e.Name()) && !known[root] {
				found = append(found, &Record{ID: e.Name(), Kubelet: KubeletReal, Root: root})
			}
		}
	}
	prefix := "nodejoin-" + cluster + "-"
	if entries, err := os.ReadDir(nsDir); err == nil {
		for _, e := range entries {
			id, ok := strings.CutPrefix(e.Name(), prefix)
			if ok && instanceIDPattern.MatchString(id) && !known[e.Name()] {
				found = append(found, &Record{ID: id, Kubelet: KubeletReal, Namespace: e.Name()})
			}
		}
	}
	return found
}

// cleanupOrphans removes what orphans finds, and the node-name links beside the roots.
func cleanupOrphans(ctx context.Context, cluster string, recs []*Record) []error {
	var errs []error
	for _, r := range orphans(cluster, recs) {
		if err := cleanupInstance(ctx, r); err != nil {
			errs = append(errs, err)
		}
	}
	// Links whose root has gone, then the directory if nothing else is left in it.
	dir := filepath.Join(RootBase(cluster), NodesDir)
	if entries, err := os.ReadDir(dir); err == nil {
		for _, e := range entries {
			link := filepath.Join(dir, e.Name())
			if _, err := os.Stat(link); err != nil && e.Type()&os.ModeSymlink != 0 {
				_ = os.Remove(link)
			}
		}
		_ = os.Remove(dir)
	}
	return errs
}

// Leftovers reports whether the host still holds instance roots or namespaces of
// cluster, whatever records say.
func Leftovers(cluster string) bool {
	_, err := os.Stat(RootBase(cluster))
	return err == nil || len(orphans(cluster, nil)) > 0
}
