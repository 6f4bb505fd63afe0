package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nodejoin/nodejoin/internal/controlplane"
	"github.com/nodejoin/nodejoin/internal/netns"
	"github.com/nodejoin/nodejoin/internal/sandbox/controller"
	"github.com/nodejoin/nodejoin/internal/sandbox/instance"
	"github.com/nodejoin/nodejoin/internal/sandbox/joinlog"
	"github.com/nodejoin/nodejoin/internal/sandbox/joinstatus"
)

// Report is a diagnosis of one node's join.
type Report struct {
	Cluster    string `json:"cluster"`
	Node       string `json:"node"`
	InstanceID string `json:"instanceID"`
	IP         string `json:"ip"`
	Kubelet    string `json:"kubelet"`
	Identity   string `json:"identity"`
	AMIFamily  string `json:"amiFamily"`
	// Notes say what the diagnosis could not look at.
	Notes []string `json:"notes,omitempty"`
	// Steps are the join's steps in order.
	Steps []Finding `json:"steps"`
	// ControlPlane is the health of the cluster's control-plane daemons.
	ControlPlane []ComponentHealth `json:"controlPlane,omitempty"`
	// Network is the node's pod network as its network add-on's ipamd reports it
	// (real kubelets whose ipamd answers).
	Network *NetworkState `json:"network,omitempty"`
	// Logs are where to look further.
	Logs []LogFile `json:"logs"`
}

// ComponentHealth is how one control-plane daemon (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler) is doing: its health endpoint's answer,
// PID, restarts and log.
type ComponentHealth = controlplane.ComponentHealth

// ClusterReport is a diagnosis of a cluster's control plane.
type ClusterReport struct {
	Cluster string `json:"cluster"`
	// Notes say what the diagnosis could not look at.
	Notes []string `json:"notes,omitempty"`
	// ControlPlane is each control-plane daemon's health, in start order.
	ControlPlane []ComponentHealth `json:"controlPlane"`
}

// Failed reports whether a control-plane daemon is unhealthy or could not be asked.
func (r *ClusterReport) Failed() bool {
	return len(r.Notes) > 0 || slices.ContainsFunc(r.ControlPlane, func(h ComponentHealth) bool { return !h.Healthy })
}

// DiagnoseCluster reports the health of each control-plane daemon of the cluster name.
func DiagnoseCluster(ctx context.Context, name string) (*ClusterReport, error) {
	dir, err := StateDir(name)
	if err != nil {
		return nil, err
	}
	s, err := controlplane.ReadState(dir)
	if errors.Is(err, controlplane.ErrNoCluster) {
		return nil, fmt.Errorf("no cluster named %s (nothing in %s); start one with `nodejoin up --name %s`", name, dir, name)
	}
	if err != nil {
		return nil, err
	}
	r := &ClusterReport{Cluster: name}
	if !s.Running() {
		r.Notes = append(r.Notes, fmt.Sprintf("the cluster's process (pid %d) is gone; clean up with `nodejoin down --name %s`", s.Owner.PID, name))
	}
	hs, err := controlplane.CheckHealth(ctx, dir)
	if err != nil {
		r.Notes = append(r.Notes, "the control plane's health cannot be checked: "+err.Error())
	}
	r.ControlPlane = hs
	return r, nil
}

// Finding is one step of a join: its status (done, failed or pending), the reason it
// failed or waits, and the log lines that show it.
type Finding struct {
	Step     string   `json:"step"`
	Status   string   `json:"status"`
	Reason   string   `json:"reason,omitempty"`
	Evidence []string `json:"evidence,omitempty"`
}

// LogFile is a log a diagnosis points to.
type LogFile struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// Failed reports whether a step failed.
func (r *Report) Failed() bool {
	return slices.ContainsFunc(r.Steps, func(f Finding) bool { return f.Status == string(joinstatus.Failed) })
}

// Diagnose explains the join of one node (by node name or instance ID) of the cluster
// name: each step with its status, and for a step that failed or waits the reason and
// the evidence from nodeadm's, the kubelet's and the controller's logs and the API.
func Diagnose(ctx context.Context, name, node string) (*Report, error) {
	dir, err := StateDir(name)
	if err != nil {
		return nil, err
	}
	if _, err := controlplane.ReadState(dir); errors.Is(err, controlplane.ErrNoCluster) {
		return nil, fmt.Errorf("no cluster named %s (nothing in %s); start one with `nodejoin up --name %s`", name, dir, name)
	}
	rec, err := findRecord(dir, name, node)
	if err != nil {
		return nil, err
	}
	return diagnose(ctx, dir, name, rec), nil
}

func findRecord(dir, cluster, nameOrID string) (*instance.Record, error) {
	recs, err := instance.ReadRecords(filepath.Join(dir, "instances"))
	if err != nil {
		return nil, err
	}
	// Newest first: a node name that a later instance took over names that instance.
	var known []string
	for i := len(recs) - 1; i >= 0; i-- {
		if r := recs[i]; r.NodeName == nameOrID || r.ID == nameOrID {
			return r, nil
		}
	}
	for _, r := range recs {
		known = append(known, r.NodeName+" ("+r.ID+")")
	}
	if len(known) == 0 {
		return nil, fmt.Errorf("cluster %s has no instances; launch one with `nodejoin add node --name %s`", cluster, cluster)
	}
	return nil, fmt.Errorf("no node or instance %q in cluster %s; its nodes are: %s (`nodejoin get nodes --name %s` lists them)",
		nameOrID, cluster, strings.Join(known, ", "), cluster)
}

func diagnose(ctx context.Context, dir, cluster string, rec *instance.Record) *Report {
	r := &Report{Cluster: cluster, Node: rec.NodeName, InstanceID: rec.ID, IP: rec.IP, Kubelet: string(rec.Kubelet),
		Identity: string(rec.Identity), AMIFamily: string(rec.AMIFamily)}
	bootstrap := rec.Identity == instance.IdentityBootstrapToken
	kubeletLog := filepath.Join(rec.Root, instance.KubeletLog)
	nodeadmLog := filepath.Join(rec.Dir, instance.NodeadmLog)
	controllerLog := filepath.Join(dir, controller.LogFile)
	if rec.Kubelet == instance.KubeletReal {
		r.Logs = append(r.Logs, LogFile{"nodeadm", nodeadmLog}, LogFile{"kubelet", kubeletLog}, LogFile{"containerd", filepath.Join(rec.Root, instance.ContainerdLog)})
	} else {
		r.Logs = append(r.Logs, LogFile{"kubelet", filepath.Join(dir, "logs", "kubeletsim", rec.NodeName+".log")})
	}
	r.Logs = append(r.Logs, LogFile{"controller", controllerLog})
	if rec.Kubelet == instance.KubeletReal {
		networkFinding(ctx, r, rec)
	}

	r.Steps = append(r.Steps, instanceFinding(rec), nodeadmFinding(rec, nodeadmLog))
	// The control plane's health is context for the steps; a failure to check it shows
	// in the notes below, from the same cause.
	r.ControlPlane, _ = controlplane.CheckHealth(ctx, dir)

	var snap *joinstatus.Snapshot
	s, err := controlplane.ReadState(dir)
	if err == nil {
		client, cerr := clientFor(s)
		if err = cerr; err == nil {
			snap, err = joinstatus.Take(ctx, client)
		}
	}
	if err != nil {
		r.Notes = append(r.Notes, "the API server cannot be asked ("+err.Error()+"): steps after nodeadm are unknown")
		return r
	}
	user := "system:node:" + rec.NodeName
	accepted, lastDenied := joinlog.WebhookDecisions(controllerLog, user)
	other, otherLine := "", ""
	lastKubeletError := ""
	if rec.Kubelet == instance.KubeletReal {
		other, otherLine = joinlog.ForeignIdentity(kubeletLog, rec.NodeName)
		lastKubeletError = joinlog.KubeletEvidence(kubeletLog)
	}
	r.Steps = append(r.Steps, apiFindings(snap, rec, bootstrap, accepted, lastDenied, other, otherLine, lastKubeletError, controllerLog)...)
	return r
}

func finding(st joinstatus.Status) Finding {
	return Finding{Step: string(st.Step), Status: string(st.State), Reason: st.Detail}
}

// instanceFinding reports whether the instance still exists.
func instanceFinding(rec *instance.Record) Finding {
	f := Finding{Step: string(joinstatus.StepInstance), Status: string(joinstatus.Done), Reason: "launched " + rec.Launched.Format("15:04:05")}
	if rec.Namespace != "" && !(netns.NS{Name: rec.Namespace}).Exists() {
		f.Status, f.Reason = string(joinstatus.Failed), "its network namespace "+rec.Namespace+" is gone (the instance was terminated)"
	}
	return f
}

// nodeadmFinding reports how nodeadm init ended.
func nodeadmFinding(rec *instance.Record, nodeadmLog string) Finding {
	f := Finding{Step: string(joinstatus.StepNodeadm), Status: string(joinstatus.Done)}
	if rec.Kubelet != instance.KubeletReal {
		f.Reason = "simulated kubelet"
		return f
	}
	data, err := os.ReadFile(nodeadmLog)
	switch {
	case err != nil:
		f.Status, f.Reason = string(joinstatus.Pending), "no nodeadm log yet"
	case strings.Contains(string(data), "✓ kubelet running"):
		f.Reason = "files written, containerd and kubelet started"
	default:
		f.Status, f.Reason = string(joinstatus.Failed), "nodeadm init did not start the kubelet"
		if e := instance.LastErrorLine(nodeadmLog); e != "" {
			f.Evidence = append(f.Evidence, "nodeadm: "+e)
		}
	}
	return f
}

// apiFindings reports the steps the API server shows, with the logs' evidence for the
// first one that failed or waits.
func apiFindings(snap *joinstatus.Snapshot, rec *instance.Record, bootstrap bool, accepted []string,
	lastDenied, other, otherLine, lastKubeletError, controllerLog string) []Finding {
	var out []Finding
	user := "system:node:" + rec.NodeName
	blocked := false
	for _, st := range snap.InstanceSteps(rec.NodeName, rec.ID, bootstrap, len(accepted) > 0) {
		f := finding(st)
		if blocked && st.State == joinstatus.Pending {
			out = append(out, f)
			continue
		}
		switch {
		case st.Step == joinstatus.StepAuthenticated && st.State == joinstatus.Done && !bootstrap:
			f.Reason = fmt.Sprintf("the webhook accepted %d token(s) for %s", len(accepted), user)
			if len(accepted) == 0 {
				f.Reason = "requests made as " + user + " reached the API server"
			}
		case st.Step == joinstatus.StepAuthenticated && other != "":
			f.Status, f.Reason = string(joinstatus.Failed), joinlog.ForeignIdentityReason(rec.NodeName, other)
			f.Evidence = append(f.Evidence, "kubelet: "+otherLine)
			if acc, _ := joinlog.WebhookDecisions(controllerLog, "system:node:"+other); len(acc) > 0 {
				f.Evidence = append(f.Evidence, "webhook (latest token accepted as "+other+"): "+acc[len(acc)-1])
			}
			blocked = true
		case st.Step == joinstatus.StepAuthenticated && st.State == joinstatus.Pending:
			f.Reason = "no token of this node was accepted"
			if lastDenied != "" {
				f.Evidence = append(f.Evidence, "webhook (latest denial, of any node): "+lastDenied)
			}
			if lastKubeletError != "" {
				f.Evidence = append(f.Evidence, "kubelet: "+lastKubeletError)
			}
			blocked = true
		case st.State == joinstatus.Failed:
			if lastKubeletError != "" {
				f.Evidence = append(f.Evidence, "kubelet: "+lastKubeletError)
			}
			blocked = true
		case st.State == joinstatus.Pending && lastKubeletError != "":
			f.Evidence = append(f.Evidence, "kubelet: "+lastKubeletError)
			blocked = true
		}
		out = append(out, f)
	}
	return out
}
