package nodejoin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodejoin/nodejoin/internal/sandbox/controlplane"
	"github.com/nodejoin/nodejoin/internal/sandbox/instance"
	"github.com/nodejoin/nodejoin/internal/sandbox/joinstatus"
	"github.com/nodejoin/nodejoin/internal/sandbox/netns"
)

func diagnoseCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "diagnose", Short: "Explain why something in a local cluster does not work"}
	var name string
	node := &cobra.Command{
		Use:   "node NODE|INSTANCE",
		Short: "Report each step of one instance's join, and for a failed step the reason and evidence",
		Long: "diagnose node shows, for one local instance (by node name or instance ID), each step of its\n" +
			"join — instance started, nodeadm done, authenticated, client certificate (bootstrap tokens),\n" +
			"Node registered, serving CSR approved, issued, Ready — with its status and, where a step failed\n" +
			"or waits, the reason and the evidence: nodeadm's error, the webhook's decision, the CSR's\n" +
			"condition, the kubelet's last error line. It exits with status 1 when a step failed.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := stateDir(name)
			if err != nil {
				return err
			}
			rec, err := findRecord(dir, args[0])
			if err != nil {
				return err
			}
			rep := diagnose(cmd.Context(), dir, rec)
			rep.print(cmd.OutOrStdout())
			if rep.failed() {
				return errDiagnosedFailure
			}
			return nil
		},
	}
	nameFlag(node, &name)
	cmd.AddCommand(node)
	return cmd
}

// errDiagnosedFailure makes diagnose exit with status 1 after its report.
var errDiagnosedFailure = errors.New("a step of the join failed (see above)")

func findRecord(dir, nameOrID string) (*instance.Record, error) {
	recs, err := instance.ReadRecords(filepath.Join(dir, "instances"))
	if err != nil {
		return nil, err
	}
	var known []string
	for _, r := range recs {
		if r.NodeName == nameOrID || r.ID == nameOrID {
			return r, nil
		}
		known = append(known, r.NodeName+" ("+r.ID+")")
	}
	if len(known) == 0 {
		return nil, fmt.Errorf("cluster in %s has no instances", dir)
	}
	return nil, fmt.Errorf("no instance %q; the cluster's instances are: %s", nameOrID, strings.Join(known, ", "))
}

// finding is one step in a diagnosis.
type finding struct {
	joinstatus.Status
	Evidence []string
}

type report struct {
	rec   *instance.Record
	steps []finding
	notes []string
	logs  []string
}

func (r *report) failed() bool {
	for _, s := range r.steps {
		if s.State == joinstatus.Failed {
			return true
		}
	}
	return false
}

func (r *report) print(w io.Writer) {
	fmt.Fprintf(w, "Node %s\n  instance %s, %s, %s kubelet, %s identity, %s user data\n",
		r.rec.NodeName, r.rec.ID, r.rec.IP, r.rec.Kubelet, r.rec.Identity, r.rec.AMIFamily)
	for _, n := range r.notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	for _, s := range r.steps {
		mark := map[joinstatus.State]string{joinstatus.Done: "✓", joinstatus.Failed: "✗", joinstatus.Pending: "·"}[s.State]
		line := fmt.Sprintf("  %s %-27s %s", mark, s.Step, s.State)
		if s.Detail != "" {
			line += ": " + s.Detail
		}
		fmt.Fprintln(w, line)
		for _, e := range s.Evidence {
			fmt.Fprintf(w, "      evidence: %s\n", e)
		}
	}
	if len(r.logs) > 0 {
		fmt.Fprintln(w, "Logs:")
		for _, l := range r.logs {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
}

// nodeUserRE finds the user an authorization error names: the Node authorizer and
// NodeRestriction quote it as User "system:node:NAME".
var nodeUserRE = regexp.MustCompile(`User \\?"system:node:([^"\\]+)\\?"`)

// foreignIdentity reads a kubelet log for a refusal that shows it authenticated as
// another node; it returns that node and the log line.
func foreignIdentity(kubeletLog, self string) (other, line string) {
	eachLine(kubeletLog, func(l string) {
		if !strings.Contains(l, "forbidden") {
			return
		}
		if m := nodeUserRE.FindStringSubmatch(l); m != nil && m[1] != self {
			// The registration attempt says it best; keep the first of those.
			if other == "" || !strings.Contains(line, "register node") {
				other, line = m[1], l
			}
		}
	})
	return other, line
}

// foreignIdentityReason is the reason given for a node that authenticated as another.
func foreignIdentityReason(self, other string) string {
	return fmt.Sprintf("the API server authenticated this kubelet as system:node:%s, not as %s: the instance presented credentials that belong to another instance, so the Node authorizer and NodeRestriction never let it act as %s", other, self, self)
}

// webhookDecisions returns the controller log's token decisions about user, and the
// last denial of any token.
func webhookDecisions(logPath, user string) (accepted []string, lastDenied string) {
	eachLine(logPath, func(l string) {
		switch {
		case strings.Contains(l, `msg="token accepted"`) && strings.Contains(l, " user="+user+" "):
			accepted = append(accepted, l)
		case strings.Contains(l, `msg="token denied"`):
			lastDenied = l
		}
	})
	return accepted, lastDenied
}

func diagnose(ctx context.Context, dir string, rec *instance.Record) *report {
	r := &report{rec: rec}
	bootstrap := rec.Identity == instance.IdentityBootstrapToken
	kubeletLog := filepath.Join(rec.Root, instance.KubeletLog)
	nodeadmLog := filepath.Join(rec.Dir, instance.NodeadmLog)
	controllerLog := filepath.Join(dir, "logs", "nodejoin-controller.log")
	if rec.Kubelet == instance.KubeletReal {
		r.logs = append(r.logs, "nodeadm:    "+nodeadmLog, "kubelet:    "+kubeletLog, "containerd: "+filepath.Join(rec.Root, instance.ContainerdLog))
	}
	r.logs = append(r.logs, "controller: "+controllerLog)

	r.steps = append(r.steps, instanceFinding(rec), nodeadmFinding(rec, nodeadmLog))

	var snap *joinstatus.Snapshot
	client, err := adminClient(dir)
	if err == nil {
		snap, err = joinstatus.Take(ctx, client)
	}
	if err != nil {
		r.notes = append(r.notes, "the API server cannot be asked ("+err.Error()+"): steps after nodeadm are unknown")
		return r
	}
	user := "system:node:" + rec.NodeName
	accepted, lastDenied := webhookDecisions(controllerLog, user)
	other, otherLine := "", ""
	if rec.Kubelet == instance.KubeletReal {
		other, otherLine = foreignIdentity(kubeletLog, rec.NodeName)
	}
	lastKubeletError := ""
	if rec.Kubelet == instance.KubeletReal {
		lastKubeletError = kubeletEvidence(kubeletLog)
	}
	r.steps = append(r.steps, apiFindings(snap, rec, bootstrap, accepted, lastDenied, other, otherLine, lastKubeletError, controllerLog)...)
	return r
}

func adminClient(dir string) (kubernetes.Interface, error) {
	s, err := controlplane.ReadState(dir)
	if err != nil {
		return nil, err
	}
	if !s.Running() {
		return nil, errors.New("the cluster is not running")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// telling are the kubelet errors that explain a stuck join, by what they contain.
var telling = []string{"forbidden", "Unauthorized", "Unable to register node", "x509", "certificate", "connection refused", "no such host", "getting credentials"}

// kubeletEvidence returns the kubelet log's last error line that explains a stuck join,
// else its last error line.
func kubeletEvidence(path string) string {
	var best string
	if !eachLine(path, func(l string) {
		if strings.HasPrefix(l, "E") && slices.ContainsFunc(telling, func(t string) bool { return strings.Contains(l, t) }) {
			best = l
		}
	}) {
		return ""
	}
	if best != "" {
		return best
	}
	return instance.LastErrorLine(path)
}

// instanceFinding reports whether the instance still exists.
func instanceFinding(rec *instance.Record) finding {
	inst := finding{Status: joinstatus.Status{Step: joinstatus.StepInstance, State: joinstatus.Done, Detail: "launched " + rec.Launched.Format("15:04:05")}}
	if rec.Namespace != "" && !(netns.NS{Name: rec.Namespace}).Exists() {
		inst.State, inst.Detail = joinstatus.Failed, "its network namespace "+rec.Namespace+" is gone (the instance was terminated)"
	}

	return inst
}

// nodeadmFinding reports how nodeadm init ended.
func nodeadmFinding(rec *instance.Record, nodeadmLog string) finding {
	nodeadm := finding{Status: joinstatus.Status{Step: joinstatus.StepNodeadm, State: joinstatus.Done}}
	if rec.Kubelet == instance.KubeletReal {
		data, err := os.ReadFile(nodeadmLog)
		switch {
		case err != nil:
			nodeadm.State, nodeadm.Detail = joinstatus.Pending, "no nodeadm log yet"
		case strings.Contains(string(data), "✓ kubelet running"):
			nodeadm.Detail = "files written, containerd and kubelet started"
		default:
			nodeadm.State, nodeadm.Detail = joinstatus.Failed, "nodeadm init did not start the kubelet"
			if e := instance.LastErrorLine(nodeadmLog); e != "" {
				nodeadm.Evidence = append(nodeadm.Evidence, "nodeadm: "+e)
			}
		}
	} else {
		nodeadm.Detail = "simulated kubelet"
	}
	return nodeadm
}

// apiFindings reports the steps the API server shows, with the logs' evidence for the
// first one that failed or waits.
func apiFindings(snap *joinstatus.Snapshot, rec *instance.Record, bootstrap bool, accepted []string,
	lastDenied, other, otherLine, lastKubeletError, controllerLog string) []finding {
	var out []finding
	user := "system:node:" + rec.NodeName
	blocked := false
	for _, st := range snap.NodeSteps(rec.NodeName, bootstrap, len(accepted) > 0) {
		f := finding{Status: st}
		if blocked && st.State == joinstatus.Pending {
			out = append(out, f)
			continue
		}
		switch {
		case st.Step == joinstatus.StepAuthenticated && st.State == joinstatus.Done && !bootstrap:
			f.Detail = fmt.Sprintf("the webhook accepted %d token(s) for %s", len(accepted), user)
			if len(accepted) == 0 {
				f.Detail = "requests made as " + user + " reached the API server"
			}
		case st.Step == joinstatus.StepAuthenticated && other != "":
			f.State, f.Detail = joinstatus.Failed, foreignIdentityReason(rec.NodeName, other)
			f.Evidence = append(f.Evidence, "kubelet: "+otherLine)
			if acc, _ := webhookDecisions(controllerLog, "system:node:"+other); len(acc) > 0 {
				f.Evidence = append(f.Evidence, "webhook (latest token accepted as "+other+"): "+acc[len(acc)-1])
			}
			blocked = true
		case st.Step == joinstatus.StepAuthenticated && st.State == joinstatus.Pending:
			f.Detail = "no token of this node was accepted"
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

// eachLine calls fn with every line of the file at path; it reports false when the file
// cannot be read.
func eachLine(path string, fn func(line string)) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fn(sc.Text())
	}
	return true
}
