package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
		Kubeconfig: s.Kubeconfig, StateDir: dir, LogDir: filepath.Join(dir, "logs"), Nodes: readNodes(dir)}
	if s.Running() {
		c.PID = s.Owner.PID
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
	// State is "Ready", "joining" (a step waits) or "failed" (a step failed).
	State string `json:"state"`
	// Step is the step that failed or waits, or the last one ("Ready").
	Step string `json:"step"`
	// Reason says why the step failed or waits, when known.
	Reason string `json:"reason,omitempty"`
}

// Join states of NodeStatus.
const (
	JoinReady   = "Ready"
	JoinJoining = "joining"
	JoinFailed  = "failed"
)

// Nodes lists the running cluster name's instances, by launch, with their join state.
func Nodes(ctx context.Context, name string) ([]NodeStatus, error) {
	dir, s, err := running(name)
	if err != nil {
		return nil, err
	}
	recs, err := instance.ReadRecords(filepath.Join(dir, "instances"))
	if err != nil {
		return nil, err
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
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].Launched.Before(recs[j].Launched) })
	out := make([]NodeStatus, 0, len(recs))
	for _, r := range recs {
		ns := NodeStatus{Name: r.NodeName, InstanceID: r.ID, IP: r.IP, Kubelet: string(r.Kubelet), Identity: string(r.Identity),
			AMIFamily: string(r.AMIFamily), Launched: r.Launched, Zone: r.Zone, AutoScalingGroup: r.AutoScalingGroup,
			State: JoinReady, Step: string(joinstatus.StepReady)}
		steps := snap.NodeSteps(r.NodeName, r.Identity == instance.IdentityBootstrapToken, accepted["system:node:"+r.NodeName])
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
	return out, nil
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
	if os.IsNotExist(statErr) && leftNS == "" {
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
