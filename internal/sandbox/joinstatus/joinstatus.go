// Package joinstatus tells how far a node has come in joining its cluster, step by step,
// from what the API server shows: the node's CSRs and its Node object. `nodejoin up`
// polls it to show live progress and `nodejoin diagnose` to explain a node.
package joinstatus

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodejoin/nodejoin/internal/cloudnode"
)

// Step is one step of a join.
type Step string

// The steps, in order. StepClientCert happens only in bootstrap-token mode.
const (
	StepInstance       Step = "instance started"
	StepNodeadm        Step = "nodeadm done"
	StepAuthenticated  Step = "authenticated"
	StepClientCert     Step = "client certificate issued"
	StepRegistered     Step = "Node registered"
	StepInitialized    Step = "Node initialized"
	StepServingApprove Step = "serving CSR approved"
	StepServingIssued  Step = "serving certificate issued"
	// StepNetwork: the container runtime reports the node's network ready, which it
	// does once a CNI configuration exists (the network add-on's ipamd writes it last).
	StepNetwork Step = "network ready"
	StepReady   Step = "Ready"
)

// Steps lists a node's steps in order; bootstrap adds the client certificate.
func Steps(bootstrap bool) []Step {
	if bootstrap {
		return []Step{StepInstance, StepNodeadm, StepAuthenticated, StepClientCert, StepRegistered, StepInitialized, StepServingApprove, StepServingIssued, StepNetwork, StepReady}
	}
	return []Step{StepInstance, StepNodeadm, StepAuthenticated, StepRegistered, StepInitialized, StepServingApprove, StepServingIssued, StepNetwork, StepReady}
}

// State is where a step stands.
type State string

// Step states.
const (
	Pending State = "pending"
	Done    State = "done"
	Failed  State = "failed"
)

// Status is one step's state, with what shows it.
type Status struct {
	Step  Step
	State State
	// Detail says what the API server shows (a CSR's name, a condition's message); for
	// a failed step, the reason.
	Detail string
}

// Snapshot is what the API server shows about nodes at one moment.
type Snapshot struct {
	Nodes map[string]*corev1.Node
	CSRs  []certificatesv1.CertificateSigningRequest
	// NotInitialized holds, by node, the latest reason the node initializer gave for
	// leaving a Node tainted.
	NotInitialized map[string]string
}

// Take reads every Node and CSR.
func Take(ctx context.Context, client kubernetes.Interface) (*Snapshot, error) {
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	csrs, err := client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing CSRs: %w", err)
	}
	events, err := client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "reason=NodeNotInitialized"})
	if err != nil {
		return nil, fmt.Errorf("listing events: %w", err)
	}
	s := &Snapshot{Nodes: map[string]*corev1.Node{}, CSRs: csrs.Items, NotInitialized: map[string]string{}}
	sort.SliceStable(events.Items, func(a, b int) bool { return lastSeen(&events.Items[a]).Before(lastSeen(&events.Items[b])) })
	for _, e := range events.Items {
		s.NotInitialized[e.InvolvedObject.Name] = e.Message
	}
	for i := range nodes.Items {
		s.Nodes[nodes.Items[i].Name] = &nodes.Items[i]
	}
	sort.Slice(s.CSRs, func(a, b int) bool {
		return s.CSRs[a].CreationTimestamp.Before(&s.CSRs[b].CreationTimestamp)
	})
	return s, nil
}

// lastSeen is when e was last reported. Events written through events.k8s.io (as the
// controller's recorder does) carry EventTime and, once repeated, Series.LastObservedTime,
// and leave the core/v1 LastTimestamp empty; older writers set only LastTimestamp.
func lastSeen(e *corev1.Event) time.Time {
	t := e.LastTimestamp.Time
	if e.EventTime.After(t) {
		t = e.EventTime.Time
	}
	if e.Series != nil && e.Series.LastObservedTime.After(t) {
		t = e.Series.LastObservedTime.Time
	}
	return t
}

// nodeUser is the username of node name's credentials.
func nodeUser(name string) string { return "system:node:" + name }

// csrFor returns node name's newest CSR for signer, if any.
func (s *Snapshot) csrFor(name, signer string) *certificatesv1.CertificateSigningRequest {
	var found *certificatesv1.CertificateSigningRequest
	for i := range s.CSRs {
		c := &s.CSRs[i]
		if c.Spec.SignerName != signer {
			continue
		}
		if signer == certificatesv1.KubeletServingSignerName && c.Spec.Username != nodeUser(name) {
			continue
		}
		if signer == certificatesv1.KubeAPIServerClientKubeletSignerName && !requestsNode(c, name) {
			continue
		}
		found = c
	}
	return found
}

// requestsNode reports whether a client CSR asks for node name's identity: the node
// renewing its own certificate, or a bootstrap token user whose request's subject
// names the node.
func requestsNode(c *certificatesv1.CertificateSigningRequest, name string) bool {
	if c.Spec.Username == nodeUser(name) {
		return true
	}
	cn, err := commonName(c.Spec.Request)
	return err == nil && cn == nodeUser(name)
}

func condition(c *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) *certificatesv1.CertificateSigningRequestCondition {
	for i := range c.Status.Conditions {
		if c.Status.Conditions[i].Type == t {
			return &c.Status.Conditions[i]
		}
	}
	return nil
}

// csrSteps reports a CSR's approval and issue.
func csrSteps(c *certificatesv1.CertificateSigningRequest, approve, issue Step) []Status {
	if c == nil {
		return []Status{{Step: approve, State: Pending, Detail: "no CSR yet"}, {Step: issue, State: Pending}}
	}
	if d := condition(c, certificatesv1.CertificateDenied); d != nil {
		return []Status{{Step: approve, State: Failed, Detail: fmt.Sprintf("CSR %s denied: %s", c.Name, d.Message)}, {Step: issue, State: Pending}}
	}
	if f := condition(c, certificatesv1.CertificateFailed); f != nil {
		return []Status{{Step: approve, State: Done, Detail: "CSR " + c.Name}, {Step: issue, State: Failed, Detail: fmt.Sprintf("CSR %s failed: %s", c.Name, f.Message)}}
	}
	out := []Status{{Step: approve, State: Pending, Detail: "CSR " + c.Name + " awaits a decision"}, {Step: issue, State: Pending}}
	if a := condition(c, certificatesv1.CertificateApproved); a != nil {
		out[0] = Status{Step: approve, State: Done, Detail: fmt.Sprintf("CSR %s: %s", c.Name, a.Message)}
		out[1].Detail = "CSR " + c.Name + " approved, not signed yet"
	}
	if len(c.Status.Certificate) > 0 {
		out[1] = Status{Step: issue, State: Done, Detail: "CSR " + c.Name}
	}
	return out
}

// NodeSteps reports the API-side steps of node name: from authenticated to Ready.
// authenticated, when true, says the webhook has accepted the node's token (known only
// to the process that runs it); otherwise any request made as the node shows it.
func (s *Snapshot) NodeSteps(name string, bootstrap, authenticated bool) []Status {
	return s.InstanceSteps(name, "", bootstrap, authenticated)
}

// InstanceID is the instance a Node's providerID (aws:///ZONE/INSTANCE-ID) names, or ""
// when it names none.
func InstanceID(providerID string) string {
	rest, ok := strings.CutPrefix(providerID, "aws://")
	if !ok {
		return ""
	}
	id := rest[strings.LastIndexByte(rest, '/')+1:]
	if !strings.HasPrefix(id, "i-") {
		return ""
	}
	return id
}

// InstanceSteps is NodeSteps for node name as instance instanceID sees it: a Node of
// that name whose providerID names another instance (an earlier instance that had the
// same address and name) is not this instance's, and its steps do not count. An empty
// instanceID, or a Node without a providerID, matches by name alone.
func (s *Snapshot) InstanceSteps(name, instanceID string, bootstrap, authenticated bool) []Status {
	var out []Status
	node := s.Nodes[name]
	other := ""
	if node != nil && instanceID != "" {
		if id := InstanceID(node.Spec.ProviderID); id != "" && id != instanceID {
			other, node = id, nil
		}
	}
	serving := s.csrFor(name, certificatesv1.KubeletServingSignerName)
	auth := Status{Step: StepAuthenticated, State: Pending}
	if bootstrap {
		client := s.csrFor(name, certificatesv1.KubeAPIServerClientKubeletSignerName)
		if client != nil {
			auth = Status{Step: StepAuthenticated, State: Done, Detail: "client CSR " + client.Name + " from " + client.Spec.Username}
		}
		cs := csrSteps(client, StepAuthenticated, StepClientCert)
		out = append(out, auth, cs[1])
		if cs[0].State == Failed {
			out[1] = Status{Step: StepClientCert, State: Failed, Detail: cs[0].Detail}
		}
	} else {
		if authenticated || node != nil || serving != nil {
			auth = Status{Step: StepAuthenticated, State: Done, Detail: "as " + nodeUser(name)}
		}
		out = append(out, auth)
	}
	switch {
	case other != "":
		out = append(out, Status{Step: StepRegistered, State: Pending, Detail: "Node " + name + " is instance " + other + "'s (its providerID), not this instance's"},
			Status{Step: StepInitialized, State: Pending})
	case node == nil:
		out = append(out, Status{Step: StepRegistered, State: Pending, Detail: "no Node " + name}, Status{Step: StepInitialized, State: Pending})
	default:
		out = append(out, Status{Step: StepRegistered, State: Done, Detail: "Node " + name}, initialized(node, s.NotInitialized[name]))
	}
	out = append(out, csrSteps(serving, StepServingApprove, StepServingIssued)...)
	ready := Status{Step: StepReady, State: Pending}
	network := Status{Step: StepNetwork, State: Pending}
	if node != nil {
		for _, c := range node.Status.Conditions {
			if c.Type != corev1.NodeReady {
				continue
			}
			switch {
			case c.Status == corev1.ConditionTrue:
				ready = Status{Step: StepReady, State: Done, Detail: c.Message}
				network = Status{Step: StepNetwork, State: Done, Detail: networkReady}
			case networkNotReady(c.Message):
				ready.Detail = strings.TrimSpace(string(c.Status) + ": " + c.Reason + " " + c.Message)
				network.Detail = "no CNI configuration yet: the network add-on (aws-node) writes it once its ipamd can hand out addresses"
			default:
				ready.Detail = strings.TrimSpace(string(c.Status) + ": " + c.Reason + " " + c.Message)
				network = Status{Step: StepNetwork, State: Done, Detail: networkReady}
			}
		}
	}
	return append(out, network, ready)
}

// networkReady is the network step's detail once the kubelet no longer reports a runtime
// without a network: the CNI configuration that aws-node's ipamd writes is in place.
const networkReady = "the runtime reports a pod network (aws-node's CNI configuration)"

// networkNotReady tells whether a Ready condition's message is the kubelet's report of
// a runtime without a network ("container runtime network not ready: NetworkReady=false
// ... cni plugin not initialized").
func networkNotReady(msg string) bool {
	return strings.Contains(msg, "network not ready") || strings.Contains(msg, "NetworkReady=false") || strings.Contains(msg, "cni plugin not initialized")
}

// initialized reports whether the node initializer removed the Node's uninitialized
// taint; a refusal that names an address, name or instance the Node does not own is a
// failure, other refusals (an instance not running yet) are waits.
func initialized(node *corev1.Node, refusal string) Status {
	for _, t := range node.Spec.Taints {
		if t.Key != cloudnode.TaintUninitialized {
			continue
		}
		st := Status{Step: StepInitialized, State: Pending, Detail: "tainted " + cloudnode.TaintUninitialized + " until checked against its instance"}
		if refusal != "" {
			st.Detail = "left uninitialized: " + refusal
			for _, final := range []string{"is not an address of", "is not a name of", "names instance", "no instance is known"} {
				if strings.Contains(refusal, final) {
					st.State = Failed
				}
			}
		}
		return st
	}
	return Status{Step: StepInitialized, State: Done, Detail: "matches instance " + node.Spec.ProviderID}
}

// Tracker remembers when each step of each node was first seen done, from successive
// snapshots, so that progress shows times finer than the API's one-second timestamps.
type Tracker struct {
	seen map[string]map[Step]time.Time
}

// NewTracker returns an empty tracker.
func NewTracker() *Tracker { return &Tracker{seen: map[string]map[Step]time.Time{}} }

// Mark records that node's step was done at t, unless it was seen earlier; it reports
// whether this is the first time.
func (t *Tracker) Mark(node string, step Step, at time.Time) bool {
	m := t.seen[node]
	if m == nil {
		m = map[Step]time.Time{}
		t.seen[node] = m
	}
	if _, ok := m[step]; ok {
		return false
	}
	m[step] = at
	return true
}

// At returns when node's step was first seen done.
func (t *Tracker) At(node string, step Step) (time.Time, bool) {
	at, ok := t.seen[node][step]
	return at, ok
}
