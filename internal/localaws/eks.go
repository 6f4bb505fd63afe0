package localaws

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
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

// NewEKS returns an EKS endpoint that knows clusters.
func NewEKS(clusters ...Cluster) *EKS {
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

func eksError(w http.ResponseWriter, status int, kind, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-Errortype", kind)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": kind, "message": msg})
}

// ServeHTTP implements DescribeCluster.
func (e *EKS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutPrefix(r.URL.Path, "/clusters/")
	if r.Method != http.MethodGet || !ok || name == "" || strings.Contains(name, "/") {
		eksError(w, http.StatusNotFound, "UnknownOperationException", "only DescribeCluster is implemented")
		return
	}
	if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") {
		eksError(w, http.StatusForbidden, "MissingAuthenticationTokenException", "Missing Authentication Token")
		return
	}
	e.mu.Lock()
	e.calls++
	throttled := e.throttle > 0
	if throttled {
		e.throttle--
	}
	c, found := e.clusters[name]
	e.mu.Unlock()
	if throttled {
		eksError(w, http.StatusTooManyRequests, "TooManyRequestsException", "Rate exceeded")
		return
	}
	if !found {
		eksError(w, http.StatusNotFound, "ResourceNotFoundException", "No cluster found for name: "+name+".")
		return
	}
	netCfg := map[string]string{"ipFamily": c.IPFamily}
	if c.ServiceIPv4CIDR != "" {
		netCfg["serviceIpv4Cidr"] = c.ServiceIPv4CIDR
	}
	if c.ServiceIPv6CIDR != "" {
		netCfg["serviceIpv6Cidr"] = c.ServiceIPv6CIDR
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"cluster": map[string]any{
		"name":                    c.Name,
		"id":                      c.ID,
		"arn":                     "arn:aws:eks:local:000000000000:cluster/" + c.Name,
		"endpoint":                c.Endpoint,
		"status":                  "ACTIVE",
		"version":                 c.Version,
		"certificateAuthority":    map[string]string{"data": base64.StdEncoding.EncodeToString(c.CertificatePEM)},
		"kubernetesNetworkConfig": netCfg,
	}})
}
