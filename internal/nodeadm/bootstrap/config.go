package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nodejoin/nodejoin/api/nodeconfig/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/nodeadm/nodeconfig"
	"github.com/nodejoin/nodejoin/internal/userdata"
)

// DefaultSource is where nodeadm reads its configuration unless told otherwise.
const DefaultSource = "imds://user-data"

// ErrNoConfig reports that no source held a NodeConfig.
var ErrNoConfig = errors.New("no node configuration found")

// Loaded is the configuration read from every source.
type Loaded struct {
	// Results are the decoded documents: user data, then each file, in source order.
	Results []*userdata.Result
	// Merged is every NodeConfig merged in order.
	Merged *v1alpha1.NodeConfig
	// BootstrapToken is the last bootstrap token found in a NodeJoinConfig; secret.
	BootstrapToken string
	// Incomplete is why EKS DescribeCluster could not complete a NodeConfig that names
	// its cluster without the endpoint or CA (nil when it did, or was not asked).
	Incomplete error
}

// Findings lists the findings of every document.
func (l *Loaded) Findings() []userdata.Finding {
	var out []userdata.Finding
	for _, r := range l.Results {
		out = append(out, r.Findings...)
	}
	return out
}

// Environment is where sources are read from.
type Environment struct {
	// IMDS reads user data for imds:// sources.
	IMDS *IMDS
	// Resolver answers AL2-style user data's look-ups; it may be nil.
	Resolver userdata.Resolver
}

// Load reads every source in order — imds://user-data, file://PATH (a file, or a
// directory whose .yaml, .yml and .json files are read in lexical order) — decodes
// each, and merges all NodeConfig documents: later sources win.
func Load(ctx context.Context, sources []string, env Environment) (*Loaded, error) {
	if len(sources) == 0 {
		sources = []string{DefaultSource}
	}
	l := &Loaded{}
	for _, src := range sources {
		blobs, err := read(ctx, src, env)
		if err != nil {
			return nil, err
		}
		for _, b := range blobs {
			doc, err := userdata.SplitNamed(b.data, b.name)
			if err != nil {
				return nil, err
			}
			res, err := userdata.Translate(ctx, doc, env.Resolver)
			if err != nil {
				return nil, err
			}
			l.Results = append(l.Results, res)
			if res.BootstrapToken != "" {
				l.BootstrapToken = res.BootstrapToken
			}
		}
	}
	var cfgs []*v1alpha1.NodeConfig
	for _, r := range l.Results {
		for _, c := range r.Configs {
			cfgs = append(cfgs, c.Config)
		}
	}
	if len(cfgs) == 0 {
		return l, fmt.Errorf("%w in %s", ErrNoConfig, strings.Join(sources, ", "))
	}
	merged, err := nodeconfig.Merge(cfgs)
	if err != nil {
		return nil, err
	}
	l.Merged = merged
	// A cluster EKS cannot complete is left as it is: validation says what is missing,
	// and Incomplete why EKS could not give it.
	l.Incomplete = completeCluster(ctx, merged, env.Resolver)
	return l, nil
}

// describeRetries is how often a DescribeCluster that names a NodeConfig's cluster is
// retried on throttling and transient errors.
const describeRetries = 3

// completeCluster fills a NodeConfig that names its cluster but not its API server
// endpoint or CA from EKS DescribeCluster, as bootstrap.sh completes a cluster name
// alone. This is a nodejoin extension (upstream nodeadm refuses such a NodeConfig): it
// lets a template name only the cluster and leave the endpoint to the network the node
// is in. What the NodeConfig gives is kept.
func completeCluster(ctx context.Context, cfg *v1alpha1.NodeConfig, r userdata.Resolver) error {
	c := &cfg.Spec.Cluster
	if c.Name == "" || r == nil || (c.APIServerEndpoint != "" && len(c.CertificateAuthority) > 0) {
		return nil
	}
	info, err := r.DescribeCluster(ctx, c.Name, describeRetries)
	if err != nil {
		return fmt.Errorf("the NodeConfig names cluster %s without its apiServerEndpoint or certificateAuthority, and EKS DescribeCluster could not give them: %w", c.Name, err)
	}
	if c.APIServerEndpoint == "" {
		c.APIServerEndpoint = info.Endpoint
	}
	if len(c.CertificateAuthority) == 0 {
		c.CertificateAuthority = info.CertificateData
	}
	if c.CIDR == "" {
		c.CIDR = info.ServiceIPv4CIDR
	}
	return nil
}

type blob struct {
	name string
	data []byte
}

func read(ctx context.Context, src string, env Environment) ([]blob, error) {
	u, err := url.Parse(src)
	if err != nil {
		return nil, fmt.Errorf("config source %q: %w", src, err)
	}
	switch u.Scheme {
	case "imds":
		if env.IMDS == nil {
			return nil, fmt.Errorf("config source %s: no instance metadata service", src)
		}
		data, err := env.IMDS.UserData(ctx)
		if err != nil {
			return nil, fmt.Errorf("config source %s: %w", src, err)
		}
		if len(data) == 0 {
			return nil, nil
		}
		return []blob{{name: "user data", data: data}}, nil
	case "file":
		return readPath(u.Host + u.Path)
	default:
		return nil, fmt.Errorf("config source %q: unsupported scheme %q (use imds://user-data or file://PATH)", src, u.Scheme)
	}
}

func readPath(path string) ([]blob, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("config source file://%s: %w", path, err)
	}
	if !st.IsDir() {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("config source file://%s: %w", path, err)
		}
		return []blob{{name: path, data: data}}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("config source file://%s: %w", path, err)
	}
	var out []blob
	for _, e := range entries {
		if !e.Type().IsRegular() || !IsConfigFile(e.Name()) {
			continue
		}
		p := filepath.Join(path, e.Name())
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("config source file://%s: %w", p, err)
		}
		out = append(out, blob{name: p, data: data})
	}
	return out, nil
}

// IsConfigFile reports whether a directory source reads the named file.
func IsConfigFile(name string) bool {
	ext := strings.ToLower(filepath.Ext(name))
	return slices.Contains([]string{".yaml", ".yml", ".json"}, ext) && len(name) > len(ext)
}
