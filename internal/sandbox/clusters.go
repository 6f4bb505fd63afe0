package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nodejoin/nodejoin/internal/controlplane"
	"github.com/nodejoin/nodejoin/internal/sandbox/controller"
	"github.com/nodejoin/nodejoin/internal/sandbox/instance"
	"github.com/nodejoin/nodejoin/internal/sandbox/joinlog"
	"github.com/nodejoin/nodejoin/internal/sandbox/joinstatus"
)

// Get describes the running cluster name.
func Get(name string) (Cluster, error) {
	dir, s, err := running(name)
	if err != nil {
		return Cluster{}, err
	}
	return describe(dir, s), nil
}

func describe(dir string, s *controlplane.State) Cluster {
	c := Cluster{Name: s.Name, Running: s.Running() && s.Ready, Network: string(s.Network), Endpoint: s.Endpoint,
		Kubeconfig: s.Kubeconfig, StateDir: dir, LogDir: filepath.Join(dir, "logs"), Nodes: readNodes(dir),
		NodeGroupKubelet: readGroupKubelet(dir)}
	if s.Running() {
		c.PID = s.Owner.PID
	}
	if c.Running && len(c.Nodes) > 0 {
		// The nodes the local EC2 still runs; all of them when it cannot be asked.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		states, err := ec2States(ctx, dir)
		cancel()
		if err == nil {
			c.Nodes = slices.DeleteFunc(c.Nodes, func(n Node) bool { st, ok := states[n.InstanceID]; return !ok || st == ec2Terminated })
		}
	}
	if a, err := controller.ReadAWSAccess(dir); err == nil {
		c.AWS = &a
	}
	return c
}

// EnvVar is one variable of a shell environment.
type EnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// AWSEnv is the environment that points AWS clients at a cluster's local AWS: the
// SDKs' AWS_ENDPOINT_URL (and per service), eksctl's own endpoint variables, the CA,
// region, the administrator's credentials and the AWS CLI profile. The AWS CLI 2.9
// ignores the endpoint variables and needs --endpoint-url "$AWS_ENDPOINT_URL".
type AWSEnv []EnvVar

// ShellQuote quotes s for a POSIX shell: in single quotes, each ' written '\”.
func ShellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// AWSEnvironment returns the environment of the running cluster name's local AWS.
func AWSEnvironment(name string) (AWSEnv, error) {
	dir, _, err := running(name)
	if err != nil {
		return nil, fmt.Errorf("cluster %s serves no local AWS while it is not running; start it with `nodejoin up --name %s` (%w)", name, name, err)
	}
	a, err := controller.ReadAWSAccess(dir)
	if err != nil {
		return nil, fmt.Errorf("cluster %s has no local AWS endpoint recorded; restart it with `nodejoin down --name %s` and `nodejoin up --name %s` (%w)", name, name, name, err)
	}
	akid, secret, err := controller.ReadAWSAdminKey(dir)
	if err != nil {
		return nil, err
	}
	env := AWSEnv{{"AWS_ENDPOINT_URL", a.Endpoint}}
	for _, svc := range []string{"EC2", "STS", "EKS", "AUTO_SCALING", "CLOUDFORMATION", "IAM", "SSM"} {
		env = append(env, EnvVar{"AWS_ENDPOINT_URL_" + svc, a.Endpoint})
	}
	for _, svc := range []string{"EKS", "CLOUDFORMATION", "EC2", "IAM", "STS"} {
		env = append(env, EnvVar{"AWS_" + svc + "_ENDPOINT", a.Endpoint})
	}
	return append(env, EnvVar{"AWS_CA_BUNDLE", a.CABundle}, EnvVar{"AWS_REGION", a.Region}, EnvVar{"AWS_DEFAULT_REGION", a.Region},
		EnvVar{"AWS_ACCESS_KEY_ID", akid}, EnvVar{"AWS_SECRET_ACCESS_KEY", secret},
		EnvVar{"AWS_CONFIG_FILE", a.ConfigFile}, EnvVar{"AWS_SHARED_CREDENTIALS_FILE", a.CredentialsFile}, EnvVar{"AWS_PROFILE", a.Profile}), nil
}

// List describes every cluster with a state directory, running or not, by name.
func List() ([]Cluster, error) {
	root, err := StateRoot()
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return []Cluster{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing clusters in %s: %w", root, err)
	}
	out := []Cluster{}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(root, e.Name())
		s, err := controlplane.ReadState(dir)
		if err != nil {
			continue
		}
		out = append(out, describe(dir, s))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// NodeStatus is a node of a running cluster and how far its join has come.
type NodeStatus struct {
	Name       string    `json:"name"`
	InstanceID string    `json:"instanceID"`
	IP         string    `json:"ip"`
	Kubelet    string    `json:"kubelet"`
	Identity   string    `json:"identity"`
	AMIFamily  string    `json:"amiFamily"`
	Launched   time.Time `json:"launched"`
	// Zone is the instance's availability zone; AutoScalingGroup the group that
	// launched it, if one did.
	Zone             string `json:"zone,omitempty"`
	AutoScalingGroup string `json:"autoScalingGroup,omitempty"`
	// InstanceState is the instance's state in the local EC2: pending, running,
	// shutting-down, terminated (also for an instance EC2 no longer lists), ...
	InstanceState string `json:"instanceState"`
	// State is "Ready", "joining" (a step waits), "failed" (a step failed) or
	// "terminated" (the instance is gone; listed only when asked for).
	State string `json:"state"`
	// Step is the step that failed or waits, or the last one ("Ready").
	Step string `json:"step"`
	// Reason says why the step failed or waits, when known.
	Reason string `json:"reason,omitempty"`
}

// Join states of NodeStatus.
const (
	JoinReady      = "Ready"
	JoinJoining    = "joining"
	JoinFailed     = "failed"
	JoinTerminated = "terminated"
)

// ec2Terminated is the EC2 state of an instance that is gone.
const ec2Terminated = "terminated"

// NodesOptions choose what Nodes lists.
type NodesOptions struct {
	// Terminated lists terminated instances too, with state "terminated".
	Terminated bool
}

// Nodes lists the running cluster name's instances, by launch, with their join state:
// those the cluster's local EC2 lists and has not terminated (terminated ones too with
// o.Terminated). A Node counts for the instance its providerID names, so a name that a
// new instance took over from a terminated one shows once, under the new instance.
func Nodes(ctx context.Context, name string, o NodesOptions) ([]NodeStatus, error) {
	dir, s, err := running(name)
	if err != nil {
		return nil, err
	}
	recs, err := instance.ReadRecords(filepath.Join(dir, "instances"))
	if err != nil {
		return nil, err
	}
	states, err := ec2States(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("asking the local EC2 of cluster %s for its instances: %w", name, err)
	}
	client, err := clientFor(s)
	if err != nil {
		return nil, err
	}
	snap, err := joinstatus.Take(ctx, client)
	if err != nil {
		return nil, fmt.Errorf("asking the API server of cluster %s: %w", name, err)
	}
	accepted := joinlog.AcceptedUsers(filepath.Join(dir, controller.LogFile))
	return nodeStatuses(recs, states, snap, accepted, o), nil
}

// nodeStatuses are the rows of `get nodes`: the instances of recs, by launch, in the
// EC2 states of states (by instance ID; an instance missing there counts as terminated,
// as EC2 forgets terminated instances after a while), with each one's join steps from
// snap and accepted (the users the webhook accepted).
func nodeStatuses(recs []*instance.Record, states map[string]string, snap *joinstatus.Snapshot, accepted map[string]bool, o NodesOptions) []NodeStatus {
	recs = slices.Clone(recs)
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].Launched.Before(recs[j].Launched) })
	out := make([]NodeStatus, 0, len(recs))
	for _, r := range recs {
		state, known := states[r.ID]
		if !known {
			state = ec2Terminated
		}
		if state == ec2Terminated && !o.Terminated {
			continue
		}
		ns := NodeStatus{Name: r.NodeName, InstanceID: r.ID, IP: r.IP, Kubelet: string(r.Kubelet), Identity: string(r.Identity),
			AMIFamily: string(r.AMIFamily), Launched: r.Launched, Zone: r.Zone, AutoScalingGroup: r.AutoScalingGroup,
			InstanceState: state, State: JoinReady, Step: string(joinstatus.StepReady)}
		if state == ec2Terminated {
			ns.State, ns.Step, ns.Reason = JoinTerminated, string(joinstatus.StepInstance), "the local EC2 reports the instance terminated"
			if !known {
				ns.Reason = "the local EC2 no longer lists the instance (terminated)"
			}
			out = append(out, ns)
			continue
		}
		steps := snap.InstanceSteps(r.NodeName, r.ID, r.Identity == instance.IdentityBootstrapToken, accepted["system:node:"+r.NodeName])
		for _, st := range steps {
			if st.State == joinstatus.Done {
				continue
			}
			ns.State, ns.Step, ns.Reason = JoinJoining, string(st.Step), st.Detail
			if st.State == joinstatus.Failed {
				ns.State = JoinFailed
			}
			break
		}
		out = append(out, ns)
	}
	return out
}

// Deleted says what Delete did.
type Deleted struct {
	Name string `json:"name"`
	// Existed is false when there was nothing to remove.
	Existed bool `json:"existed"`
	// StoppedPID is the process that ran the cluster, when it was running.
	StoppedPID int `json:"stoppedPID,omitempty"`
}

// Delete stops the cluster name and removes everything it left: processes, network
// namespaces, mounts, cgroups and its state directory. It also cleans up after a
// cluster whose process crashed. Deleting a cluster that does not exist is no error.
func Delete(ctx context.Context, name string) (Deleted, error) {
	d := Deleted{Name: name}
	dir, err := StateDir(name)
	if err != nil {
		return d, err
	}
	_, statErr := os.Stat(dir)
	leftNS := controlplane.LeftoverNamespace(name)
	if os.IsNotExist(statErr) && leftNS == "" && !instance.Leftovers(name) {
		return d, nil
	}
	d.Existed = true
	if s, err := controlplane.ReadState(dir); err == nil && s.Running() && s.Owner.PID != os.Getpid() {
		d.StoppedPID = s.Owner.PID
	}
	if err := destroy(ctx, dir, name); err != nil {
		return d, fmt.Errorf("removing cluster %s: %w", name, err)
	}
	return d, controlplane.DeleteLeftoverNamespace(ctx, name)
}
