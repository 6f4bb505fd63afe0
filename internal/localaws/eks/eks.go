// Package eks is the local AWS's EKS, on its REST-JSON protocol: DescribeCluster for
// the clusters it is given. Of the local AWS it imports the wire layer (protocol) only.
package eks

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"sync"

	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

// Cluster is what EKS DescribeCluster returns about one cluster.
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

// EKS answers EKS DescribeCluster (GET /clusters/{name}, REST-JSON) for the clusters it
// knows. Requests must be SigV4-signed; the signature itself is checked by the STS
// emulator's verifier where credentials matter, not here.
type EKS struct {
	mu       sync.Mutex
	clusters map[string]Cluster
	// throttle makes the next n calls fail with TooManyRequestsException, to exercise
	// clients' retries.
	throttle int
	calls    int
}

// New returns an EKS endpoint that knows clusters.
func New(clusters ...Cluster) *EKS {
	e := &EKS{clusters: map[string]Cluster{}}
	for _, c := range clusters {
		e.clusters[c.Name] = c
	}
	return e
}

// Throttle makes the next n DescribeCluster calls fail as EKS does under load.
func (e *EKS) Throttle(n int) {
	e.mu.Lock()
	e.throttle = n
	e.mu.Unlock()
}

// Calls counts the DescribeCluster calls received.
func (e *EKS) Calls() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.calls
}

// route is one REST-JSON operation: its method and the path before its one parameter.
type route struct {
	method, prefix string
	handle         func(e *EKS, param string) (any, *protocol.Error)
}

// routes is EKS's table: each operation's route and handler.
var routes = map[string]route{
	"DescribeCluster": {http.MethodGet, "/clusters/", (*EKS).describeCluster},
}

// ServeHTTP routes a request to its operation.
func (e *EKS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var op *route
	var param string
	for _, rt := range routes {
		if p, ok := strings.CutPrefix(r.URL.Path, rt.prefix); ok && r.Method == rt.method && p != "" && !strings.Contains(p, "/") {
			op, param = &rt, p
		}
	}
	if op == nil {
		protocol.WriteJSONError(w, &protocol.Error{Status: http.StatusNotFound, Code: "UnknownOperationException", Message: "only DescribeCluster is implemented"})
		return
	}
	if !protocol.Signed(r) {
		protocol.WriteJSONError(w, &protocol.Error{Status: http.StatusForbidden, Code: "MissingAuthenticationTokenException", Message: "Missing Authentication Token"})
		return
	}
	out, aerr := op.handle(e, param)
	if aerr != nil {
		protocol.WriteJSONError(w, aerr)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func (e *EKS) describeCluster(name string) (any, *protocol.Error) {
	e.mu.Lock()
	e.calls++
	throttled := e.throttle > 0
	if throttled {
		e.throttle--
	}
	c, found := e.clusters[name]
	e.mu.Unlock()
	if throttled {
		return nil, &protocol.Error{Status: http.StatusTooManyRequests, Code: "TooManyRequestsException", Message: "Rate exceeded"}
	}
	if !found {
		return nil, &protocol.Error{Status: http.StatusNotFound, Code: "ResourceNotFoundException", Message: "No cluster found for name: " + name + "."}
	}
	netCfg := map[string]string{"ipFamily": c.IPFamily}
	if c.ServiceIPv4CIDR != "" {
		netCfg["serviceIpv4Cidr"] = c.ServiceIPv4CIDR
	}
	if c.ServiceIPv6CIDR != "" {
		netCfg["serviceIpv6Cidr"] = c.ServiceIPv6CIDR
	}
	return map[string]any{"cluster": map[string]any{
		"name":                    c.Name,
		"id":                      c.ID,
		"arn":                     "arn:aws:eks:local:000000000000:cluster/" + c.Name,
		"endpoint":                c.Endpoint,
		"status":                  "ACTIVE",
		"version":                 c.Version,
		"certificateAuthority":    map[string]string{"data": base64.StdEncoding.EncodeToString(c.CertificatePEM)},
		"kubernetesNetworkConfig": netCfg,
	}}, nil
}
