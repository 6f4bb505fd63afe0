package sandbox

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodejoin/nodejoin/internal/atomicfile"
	"github.com/nodejoin/nodejoin/internal/controlplane"
	"github.com/nodejoin/nodejoin/internal/process"
	"github.com/nodejoin/nodejoin/internal/sandbox/controller"
	"github.com/nodejoin/nodejoin/internal/sandbox/cpnode"
	"github.com/nodejoin/nodejoin/internal/sandbox/instance"
)

// StateRoot is where clusters keep their state: $XDG_STATE_HOME/nodejoin, by default
// ~/.local/state/nodejoin.
func StateRoot() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "nodejoin"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("finding the state directory: set XDG_STATE_HOME or HOME: %w", err)
	}
	return filepath.Join(home, ".local", "state", "nodejoin"), nil
}

// StateDir is the state directory of the cluster name.
func StateDir(name string) (string, error) {
	root, err := StateRoot()
	if err != nil {
		return "", err
	}
	if name == "" || filepath.Base(name) != name || name == "." || name == ".." {
		return "", fmt.Errorf("cluster name %q is not a plain name", name)
	}
	return filepath.Join(root, name), nil
}

// running returns the state directory and state of the running cluster name, or an
// error that says what to do.
func running(name string) (string, *controlplane.State, error) {
	dir, err := StateDir(name)
	if err != nil {
		return "", nil, err
	}
	s, err := controlplane.ReadState(dir)
	if errors.Is(err, controlplane.ErrNoCluster) {
		return "", nil, fmt.Errorf("no cluster named %s (nothing in %s); start one with `nodejoin up --name %s`", name, dir, name)
	}
	if err != nil {
		return "", nil, err
	}
	if !s.Running() || !s.Ready {
		return "", nil, fmt.Errorf("cluster %s is not running; clean it up with `nodejoin down --name %s` and start it again", name, name)
	}
	return dir, s, nil
}

// destroy stops the cluster in dir and removes everything it made: first its owner
// process (which stops its instances and daemons in order), then whatever a crashed
// owner left — instance processes, mounts, cgroups, namespaces — then the control
// plane's leftovers and the state directory.
func destroy(ctx context.Context, dir, name string) error {
	if s, err := controlplane.ReadState(dir); err == nil && s.Running() && s.Owner.PID != os.Getpid() {
		process.Terminate(s.Owner, 90*time.Second)
	}
	// The control-plane node first: the instances' cleanup removes the roots' parent
	// only once it is empty.
	if err := cpnode.Cleanup(name); err != nil {
		return err
	}
	if err := instance.Cleanup(ctx, filepath.Join(dir, "instances"), name); err != nil {
		return err
	}
	return controlplane.Destroy(ctx, dir)
}

// nodesFile records, in the state directory, the nodes launched and how long each took
// to become Ready.
const nodesFile = "nodes.json"

// writeNodes records the nodes in the state directory.
func writeNodes(dir string, nodes []Node) error {
	if nodes == nil {
		nodes = []Node{}
	}
	data, err := json.MarshalIndent(nodes, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, nodesFile), append(data, '\n'), 0o600)
}

// readNodes reads what writeNodes recorded: every node launched, running or not
// (describe keeps those the local EC2 has not terminated).
func readNodes(dir string) []Node {
	nodes := []Node{}
	if data, err := os.ReadFile(filepath.Join(dir, nodesFile)); err == nil {
		_ = json.Unmarshal(data, &nodes)
	}
	return nodes
}

// clientFor returns an admin client of the cluster s describes.
func clientFor(s *controlplane.State) (kubernetes.Interface, error) {
	if !s.Running() {
		return nil, errors.New("the cluster is not running")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// ec2States asks the local EC2 of the cluster whose state directory is dir, through its
// endpoint as the account's administrator, for the state of every instance it lists
// (terminated ones included, until EC2 forgets them), by instance ID.
func ec2States(ctx context.Context, dir string) (map[string]string, error) {
	a, err := controller.ReadAWSAccess(dir)
	if err != nil {
		return nil, fmt.Errorf("reading how to reach the local AWS: %w", err)
	}
	keyID, secret, err := controller.ReadAWSAdminKey(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the local AWS's administrator key: %w", err)
	}
	caPEM, err := os.ReadFile(a.CABundle)
	if err != nil {
		return nil, fmt.Errorf("reading the local AWS's CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("the local AWS's CA %s holds no PEM certificate", a.CABundle)
	}
	cfg := aws.Config{
		Region:      a.Region,
		Credentials: credentials.NewStaticCredentialsProvider(keyID, secret, ""),
		HTTPClient: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		}},
	}
	client := ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.BaseEndpoint = aws.String(a.Endpoint) })
	states := map[string]string{}
	pages := ec2.NewDescribeInstancesPaginator(client, &ec2.DescribeInstancesInput{})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("DescribeInstances at %s: %w", a.Endpoint, err)
		}
		for _, res := range page.Reservations {
			for _, in := range res.Instances {
				if in.InstanceId != nil && in.State != nil {
					states[*in.InstanceId] = string(in.State.Name)
				}
			}
		}
	}
	return states, nil
}
