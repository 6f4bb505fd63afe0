// Package eks is the local AWS's EKS, on its REST-JSON protocol: clusters
// (ListClusters, DescribeCluster, DescribeClusterVersions), managed node groups
// (Create/Describe/List/Delete, UpdateNodegroupConfig, UpdateNodegroupVersion), their
// updates (DescribeUpdate, ListUpdates) and access entries (node and STANDARD, with
// access policies). It owns the wire: routes,
// request decoding and validation, pagination and EKS's error shape. The state is a
// Backend's: nodejoin's is the NodeGroup and NodeAccessEntry objects of the cluster
// (internal/nodegroup/eksbackend), so that EKS and `kubectl get nodegroups` never
// disagree; New serves a static list of clusters for nodeadm's tests. Of the local AWS it
// imports the wire layer (protocol) only, and no Kubernetes code.
package eks

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/nodejoin/nodejoin/internal/eksapi"
	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

// Backend holds what the local EKS serves. Its methods get requests the server has
// validated on the wire (types, ranges, enums, required fields); they return an
// *eksapi.Error for anything the caller did wrong (unknown cluster or node group, a
// value that does not fit the resource, an update in progress) and any other error
// for their own failures, which the server answers as ServerException without its text.
type Backend interface {
	ListClusters(ctx context.Context) ([]string, error)
	DescribeCluster(ctx context.Context, name string) (eksapi.Cluster, error)
	ClusterVersions(ctx context.Context) ([]eksapi.ClusterVersion, error)

	CreateNodegroup(ctx context.Context, cluster string, in *eksapi.CreateNodegroupRequest) (eksapi.Nodegroup, error)
	DescribeNodegroup(ctx context.Context, cluster, name string) (eksapi.Nodegroup, error)
	// ListNodegroups returns the names in a stable order.
	ListNodegroups(ctx context.Context, cluster string) ([]string, error)
	UpdateNodegroupConfig(ctx context.Context, cluster, name string, in *eksapi.UpdateNodegroupConfigRequest) (eksapi.Update, error)
	UpdateNodegroupVersion(ctx context.Context, cluster, name string, in *eksapi.UpdateNodegroupVersionRequest) (eksapi.Update, error)
	DescribeUpdate(ctx context.Context, cluster, nodegroup, id string) (eksapi.Update, error)
	// ListUpdates returns the IDs, oldest first.
	ListUpdates(ctx context.Context, cluster, nodegroup string) ([]string, error)
	DeleteNodegroup(ctx context.Context, cluster, name string) (eksapi.Nodegroup, error)

	CreateAccessEntry(ctx context.Context, cluster string, in *eksapi.CreateAccessEntryRequest) (eksapi.AccessEntry, error)
	DescribeAccessEntry(ctx context.Context, cluster, principalARN string) (eksapi.AccessEntry, error)
	// ListAccessEntries returns the principal ARNs in a stable order.
	ListAccessEntries(ctx context.Context, cluster string) ([]string, error)
	DeleteAccessEntry(ctx context.Context, cluster, principalARN string) error
	// The STANDARD entries' operations (access.go).
	AccessPolicyBackend
}

// Cluster is what the static backend of New knows about one cluster.
type Cluster struct {
	Name            string
	ID              string
	Endpoint        string
	CertificatePEM  []byte
	ServiceIPv4CIDR string
	ServiceIPv6CIDR string
	IPFamily        string
	Version         string
}

// EKS answers EKS's REST-JSON operations from a Backend. Requests must be SigV4-signed;
// the signature itself is verified by the edge router in front of it (or, for
// nodeadm's tests, not at all), not here.
type EKS struct {
	backend Backend
	log     *slog.Logger

	mu sync.Mutex
	// throttle makes the next n calls fail with TooManyRequestsException, to exercise
	// clients' retries.
	throttle int
	calls    int
}

// New returns an EKS endpoint that knows clusters and nothing else: node group and
// access entry operations find no cluster's resources and create none.
func New(clusters ...Cluster) *EKS { return NewWithBackend(newStatic(clusters), nil) }

// NewWithBackend returns an EKS endpoint over b; log (nil: slog.Default) records the
// backend's own failures.
func NewWithBackend(b Backend, log *slog.Logger) *EKS {
	if log == nil {
		log = slog.Default()
	}
	return &EKS{backend: b, log: log}
}

// SetBackend replaces the backend: the local AWS starts before the cluster's API server
// it serves node groups from, so the integrator swaps the backend in once it is up.
func (e *EKS) SetBackend(b Backend) {
	e.mu.Lock()
	e.backend = b
	e.mu.Unlock()
}

func (e *EKS) current() Backend {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.backend
}

// Throttle makes the next n calls fail as EKS does under load.
func (e *EKS) Throttle(n int) {
	e.mu.Lock()
	e.throttle = n
	e.mu.Unlock()
}

// Calls counts the calls received (throttled ones included).
func (e *EKS) Calls() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.calls
}

// maxBody bounds a request body: EKS's largest bodies (a node group with 50 labels, 50
// taints and 50 tags) are a few KiB.
const maxBody = 64 << 10

// call is one decoded request: its path parameters, query and body.
type call struct {
	ctx    context.Context
	params []string
	query  url.Values
	r      *http.Request
	// backend is the backend when the request came in.
	backend Backend
}

// route is one operation: its method, its path with * for a parameter, and its handler.
type route struct {
	name, method, path string
	handle             func(e *EKS, c *call) (any, error)
}

// routes is the table of the operations the local EKS implements.
var routes = []route{
	{"ListClusters", http.MethodGet, "/clusters", (*EKS).listClusters},
	{"DescribeCluster", http.MethodGet, "/clusters/*", (*EKS).describeCluster},
	{"DescribeClusterVersions", http.MethodGet, "/cluster-versions", (*EKS).describeClusterVersions},
	{"CreateNodegroup", http.MethodPost, "/clusters/*/node-groups", (*EKS).createNodegroup},
	{"ListNodegroups", http.MethodGet, "/clusters/*/node-groups", (*EKS).listNodegroups},
	{"DescribeNodegroup", http.MethodGet, "/clusters/*/node-groups/*", (*EKS).describeNodegroup},
	{"DeleteNodegroup", http.MethodDelete, "/clusters/*/node-groups/*", (*EKS).deleteNodegroup},
	{"UpdateNodegroupConfig", http.MethodPost, "/clusters/*/node-groups/*/update-config", (*EKS).updateNodegroupConfig},
	{"UpdateNodegroupVersion", http.MethodPost, "/clusters/*/node-groups/*/update-version", (*EKS).updateNodegroupVersion},
	{"DescribeUpdate", http.MethodGet, "/clusters/*/updates/*", (*EKS).describeUpdate},
	{"ListUpdates", http.MethodGet, "/clusters/*/updates", (*EKS).listUpdates},
	{"CreateAccessEntry", http.MethodPost, "/clusters/*/access-entries", (*EKS).createAccessEntry},
	{"ListAccessEntries", http.MethodGet, "/clusters/*/access-entries", (*EKS).listAccessEntries},
	{"DescribeAccessEntry", http.MethodGet, "/clusters/*/access-entries/*", (*EKS).describeAccessEntry},
	{"DeleteAccessEntry", http.MethodDelete, "/clusters/*/access-entries/*", (*EKS).deleteAccessEntry},
	{"ListAssociatedAccessPolicies", http.MethodGet, "/clusters/*/access-entries/*/access-policies", (*EKS).listAssociatedAccessPolicies},
	{"UpdateAccessEntry", http.MethodPost, "/clusters/*/access-entries/*", (*EKS).updateAccessEntry},
	{"AssociateAccessPolicy", http.MethodPost, "/clusters/*/access-entries/*/access-policies", (*EKS).associateAccessPolicy},
	{"DisassociateAccessPolicy", http.MethodDelete, "/clusters/*/access-entries/*/access-policies/*", (*EKS).disassociateAccessPolicy},
	{"ListAccessPolicies", http.MethodGet, "/access-policies", (*EKS).listAccessPolicies},
}

// unimplemented names the EKS operations a client may try that the local EKS does not
// implement, so that the refusal says which one it was.
var unimplemented = []route{
	{name: "CreateCluster", method: http.MethodPost, path: "/clusters"},
	{name: "DeleteCluster", method: http.MethodDelete, path: "/clusters/*"},
	{name: "UpdateClusterConfig", method: http.MethodPost, path: "/clusters/*/update-config"},
	{name: "UpdateClusterVersion", method: http.MethodPost, path: "/clusters/*/updates"},
	{name: "CreateAddon", method: http.MethodPost, path: "/clusters/*/addons"},
	{name: "ListAddons", method: http.MethodGet, path: "/clusters/*/addons"},
	{name: "DescribeAddon", method: http.MethodGet, path: "/clusters/*/addons/*"},
	{name: "DeleteAddon", method: http.MethodDelete, path: "/clusters/*/addons/*"},
	{name: "UpdateAddon", method: http.MethodPost, path: "/clusters/*/addons/*/update"},
	{name: "DescribeAddonVersions", method: http.MethodGet, path: "/addons/supported-versions"},
	{name: "CreateFargateProfile", method: http.MethodPost, path: "/clusters/*/fargate-profiles"},
	{name: "ListFargateProfiles", method: http.MethodGet, path: "/clusters/*/fargate-profiles"},
	{name: "DescribeFargateProfile", method: http.MethodGet, path: "/clusters/*/fargate-profiles/*"},
	{name: "DeleteFargateProfile", method: http.MethodDelete, path: "/clusters/*/fargate-profiles/*"},
	{name: "ListIdentityProviderConfigs", method: http.MethodGet, path: "/clusters/*/identity-provider-configs"},
	{name: "AssociateIdentityProviderConfig", method: http.MethodPost, path: "/clusters/*/identity-provider-configs/associate"},
	{name: "CreatePodIdentityAssociation", method: http.MethodPost, path: "/clusters/*/pod-identity-associations"},
	{name: "ListPodIdentityAssociations", method: http.MethodGet, path: "/clusters/*/pod-identity-associations"},
	{name: "ListInsights", method: http.MethodPost, path: "/clusters/*/insights"},
	{name: "ListTagsForResource", method: http.MethodGet, path: "/tags/*"},
	{name: "TagResource", method: http.MethodPost, path: "/tags/*"},
	{name: "UntagResource", method: http.MethodDelete, path: "/tags/*"},
	{name: "RegisterCluster", method: http.MethodPost, path: "/cluster-registrations"},
	{name: "DeregisterCluster", method: http.MethodDelete, path: "/cluster-registrations/*"},
}

// match reports whether segs (the request's unescaped path segments) fit pattern, and
// the segments that stood for its parameters.
func match(pattern string, segs []string) ([]string, bool) {
	ps := strings.Split(strings.TrimPrefix(pattern, "/"), "/")
	if len(ps) != len(segs) {
		return nil, false
	}
	var params []string
	for i, p := range ps {
		switch {
		case p == "*" && segs[i] != "":
			params = append(params, segs[i])
		case p != segs[i]:
			return nil, false
		}
	}
	return params, true
}

// segments splits the escaped path and unescapes each segment: an access entry's
// principal ARN travels as one segment with its slashes escaped.
func segments(r *http.Request) ([]string, bool) {
	raw := strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/")
	for i, s := range raw {
		u, err := url.PathUnescape(s)
		if err != nil {
			return nil, false
		}
		raw[i] = u
	}
	return raw, true
}

// ServeHTTP routes a request to its operation and writes its answer or EKS's error.
func (e *EKS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Amzn-Requestid", protocol.NewRequestID())
	segs, ok := segments(r)
	if !ok {
		writeError(w, eksapi.InvalidRequest("the request path %q is not escaped correctly", r.URL.EscapedPath()))
		return
	}
	var op *route
	var params []string
	for i := range routes {
		if p, ok := match(routes[i].path, segs); ok && r.Method == routes[i].method {
			op, params = &routes[i], p
			break
		}
	}
	if op == nil {
		writeUnimplemented(w, r, segs)
		return
	}
	if !protocol.Signed(r) {
		protocol.WriteJSONError(w, &protocol.Error{Status: http.StatusForbidden, Code: "MissingAuthenticationTokenException", Message: "Missing Authentication Token"})
		return
	}
	if e.throttled() {
		protocol.WriteJSONError(w, &protocol.Error{Status: http.StatusTooManyRequests, Code: "TooManyRequestsException", Message: "Rate exceeded"})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	out, err := op.handle(e, &call{ctx: r.Context(), params: params, query: r.URL.Query(), r: r, backend: e.current()})
	if err != nil {
		if aerr, ok := eksapi.AsError(err); ok {
			writeError(w, aerr)
			return
		}
		e.log.Error("local EKS backend failed", "operation", op.name, "err", err)
		writeError(w, &eksapi.Error{Code: eksapi.CodeServer, Message: op.name + " failed inside the local EKS; its log says why"})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func (e *EKS) throttled() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls++
	if e.throttle > 0 {
		e.throttle--
		return true
	}
	return false
}

// writeUnimplemented names the operation a request was, when it is one of EKS's.
func writeUnimplemented(w http.ResponseWriter, r *http.Request, segs []string) {
	for _, u := range unimplemented {
		if _, ok := match(u.path, segs); ok && r.Method == u.method {
			protocol.WriteJSONError(w, &protocol.Error{Status: http.StatusBadRequest, Code: eksapi.CodeInvalidRequest,
				Message: "the local EKS does not implement " + u.name + "; it implements " + implemented()})
			return
		}
	}
	protocol.WriteJSONError(w, &protocol.Error{Status: http.StatusNotFound, Code: "UnknownOperationException",
		Message: r.Method + " " + r.URL.EscapedPath() + " is no operation of the local EKS; it implements " + implemented()})
}

func implemented() string {
	names := make([]string, len(routes))
	for i, r := range routes {
		names[i] = r.name
	}
	return strings.Join(names, ", ")
}

// status is the HTTP status EKS answers an error code with.
func status(code string) int {
	switch code {
	case eksapi.CodeResourceNotFound:
		return http.StatusNotFound
	case eksapi.CodeResourceInUse:
		return http.StatusConflict
	case eksapi.CodeServer:
		return http.StatusInternalServerError
	}
	return http.StatusBadRequest
}

func writeError(w http.ResponseWriter, e *eksapi.Error) {
	protocol.WriteJSONError(w, &protocol.Error{Status: status(e.Code), Code: e.Code, Message: e.Message})
}

func (e *EKS) listClusters(c *call) (any, error) {
	p, err := readPage(c.query)
	if err != nil {
		return nil, err
	}
	names, err := c.backend.ListClusters(c.ctx)
	if err != nil {
		return nil, err
	}
	page, next := p.cut(names)
	return struct {
		Clusters  []string `json:"clusters"`
		NextToken string   `json:"nextToken,omitempty"`
	}{page, next}, nil
}

func (e *EKS) describeCluster(c *call) (any, error) {
	cl, err := c.backend.DescribeCluster(c.ctx, c.params[0])
	if err != nil {
		return nil, err
	}
	return struct {
		Cluster eksapi.Cluster `json:"cluster"`
	}{cl}, nil
}

// staticCluster is what New's clusters look like on the wire.
func staticCluster(c Cluster) eksapi.Cluster {
	netCfg := &eksapi.KubernetesNetworkConfig{IPFamily: c.IPFamily, ServiceIpv4Cidr: c.ServiceIPv4CIDR, ServiceIpv6Cidr: c.ServiceIPv6CIDR}
	return eksapi.Cluster{
		Name: c.Name, ID: c.ID, Arn: "arn:aws:eks:local:000000000000:cluster/" + c.Name,
		Endpoint: c.Endpoint, Status: "ACTIVE", Version: c.Version,
		CertificateAuthority:    &eksapi.CertificateAuthority{Data: base64.StdEncoding.EncodeToString(c.CertificatePEM)},
		KubernetesNetworkConfig: netCfg,
		ResourcesVpcConfig:      eksapi.VpcConfig{SubnetIDs: []string{}, SecurityGroupIDs: []string{}, PublicAccessCidrs: []string{}},
		Tags:                    map[string]string{},
	}
}

func (e *EKS) describeClusterVersions(c *call) (any, error) {
	for _, unsupported := range []string{"clusterType", "status", "versionStatus"} {
		if v := c.query.Get(unsupported); v != "" && v != "eks" && v != "STANDARD_SUPPORT" {
			return nil, eksapi.InvalidParameter("%s: the local EKS lists eks clusters' versions in STANDARD_SUPPORT only, not %q", unsupported, v)
		}
	}
	p, err := readPage(c.query)
	if err != nil {
		return nil, err
	}
	all, err := c.backend.ClusterVersions(c.ctx)
	if err != nil {
		return nil, err
	}
	want := c.query["clusterVersions"]
	defaultOnly := c.query.Get("defaultOnly") == "true"
	var keys []string
	byKey := map[string]eksapi.ClusterVersion{}
	for _, v := range all {
		if (len(want) > 0 && !slices.Contains(want, v.ClusterVersion)) || (defaultOnly && !v.DefaultVersion) {
			continue
		}
		keys = append(keys, v.ClusterVersion)
		byKey[v.ClusterVersion] = v
	}
	keys, next := p.cut(keys)
	out := make([]eksapi.ClusterVersion, 0, len(keys))
	for _, k := range keys {
		out = append(out, byKey[k])
	}
	return struct {
		ClusterVersions []eksapi.ClusterVersion `json:"clusterVersions"`
		NextToken       string                  `json:"nextToken,omitempty"`
	}{out, next}, nil
}
