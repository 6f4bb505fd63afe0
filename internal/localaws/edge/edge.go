// Package edge is the local AWS's one endpoint for every service, as AWS's own
// endpoints are one URL per service but the AWS CLI (2.9) takes one --endpoint-url for
// all: it routes each request by the service its SigV4 credential scope names (ec2,
// iam, sts, eks, ...), after verifying its signature against the account's
// credentials, and hands the service the verified caller in the request's context
// (protocol.CallerFrom). Refusals are written in the service's own error shape. Of the
// local AWS it imports the wire layer (protocol) only; services are registered with
// Route.
package edge

import (
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

// Edge serves the services registered with Route on one endpoint. Safe for concurrent
// use; Route may be called while it serves.
type Edge struct {
	lookup protocol.CredentialLookup
	// Log, when set, receives refused requests (service, access key ID, code; never a
	// secret or token).
	Log *slog.Logger
	now func() time.Time

	mu     sync.RWMutex
	routes map[string]http.Handler
}

// New returns an edge that verifies signatures against the credentials lookup finds,
// without services.
func New(lookup protocol.CredentialLookup) *Edge {
	return &Edge{lookup: lookup, now: time.Now, routes: map[string]http.Handler{}}
}

// Route serves the service (its signing name: "ec2", "autoscaling", "eks", ...) with h;
// a second Route of the same service replaces the first.
func (e *Edge) Route(service string, h http.Handler) {
	e.mu.Lock()
	e.routes[service] = h
	e.mu.Unlock()
}

// Services returns the signing names of the services routed, sorted.
func (e *Edge) Services() []string {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := make([]string, 0, len(e.routes))
	for s := range e.routes {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

func (e *Edge) route(service string) http.Handler {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.routes[service]
}

// services are the wire protocols of the services AWS clients sign for: their error
// shape and, for the Query services, their XML namespace. A service not listed answers
// in the JSON shape, as every newer AWS service does.
var services = map[string]struct {
	shape protocol.ErrorShape
	xmlns string
}{
	"ec2":                  {protocol.EC2Shape, "http://ec2.amazonaws.com/doc/2016-11-15/"},
	"sts":                  {protocol.QueryShape, "https://sts.amazonaws.com/doc/2011-06-15/"},
	"iam":                  {protocol.QueryShape, "https://iam.amazonaws.com/doc/2010-05-08/"},
	"autoscaling":          {protocol.QueryShape, "http://autoscaling.amazonaws.com/doc/2011-01-01/"},
	"cloudformation":       {protocol.QueryShape, "http://cloudformation.amazonaws.com/doc/2010-05-15/"},
	"elasticloadbalancing": {protocol.QueryShape, "http://elasticloadbalancing.amazonaws.com/doc/2015-12-01/"},
	"sns":                  {protocol.QueryShape, "http://sns.amazonaws.com/doc/2010-03-31/"},
}

// writeError answers e in the shape of service's protocol.
func writeError(w http.ResponseWriter, service string, shape protocol.ErrorShape, e *protocol.Error) {
	id := protocol.NewRequestID()
	w.Header().Set("X-Amzn-Requestid", id)
	switch shape {
	case protocol.EC2Shape:
		protocol.WriteEC2Error(w, id, e)
	case protocol.JSONShape:
		protocol.WriteJSONError(w, e)
	default:
		protocol.QueryErrorWriter(services[service].xmlns)(w, id, e)
	}
}

func shapeOf(service string) protocol.ErrorShape {
	if s, ok := services[service]; ok {
		return s.shape
	}
	return protocol.JSONShape
}

// guessShape is the error shape of a request that names no service: JSON for the JSON
// protocols (X-Amz-Target, a JSON body) and REST paths, Query otherwise.
func guessShape(r *http.Request) protocol.ErrorShape {
	if r.Header.Get("X-Amz-Target") != "" || strings.Contains(r.Header.Get("Content-Type"), "json") || r.URL.Path != "/" && r.URL.Path != "" {
		return protocol.JSONShape
	}
	return protocol.QueryShape
}

// ServeHTTP verifies the request's signature and hands it, with its caller, to the
// service its credential scope names. STS's presigned GETs (the requests inside node
// identity tokens) go to STS unverified: STS verifies them itself, with the token's
// own rules of lifetime.
func (e *Edge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	scope, ok := protocol.RequestScope(r)
	if !ok {
		shape := guessShape(r)
		f := &protocol.AuthError{Failure: protocol.AuthMissing, Message: "Request is missing Authentication Token"}
		if r.Header.Get("Authorization") != "" {
			f = &protocol.AuthError{Failure: protocol.AuthMalformed,
				Message: "Authorization header requires the AWS4-HMAC-SHA256 algorithm and 'Credential=AKID/DATE/REGION/SERVICE/aws4_request', 'SignedHeaders' and 'Signature' parameters"}
		}
		e.refuse(w, "", shape, f.In(shape), "")
		return
	}
	shape := shapeOf(scope.Service)
	h := e.route(scope.Service)
	if h == nil {
		code := "InvalidAction"
		if shape == protocol.JSONShape {
			code = "UnknownOperationException"
		}
		e.refuse(w, scope.Service, shape, protocol.Errorf(http.StatusBadRequest, code,
			"This local AWS endpoint does not serve the service %q named by the request's credential scope; it serves %s",
			scope.Service, strings.Join(e.Services(), ", ")), scope.AccessKeyID)
		return
	}
	if scope.Presigned && scope.Service == "sts" {
		h.ServeHTTP(w, r)
		return
	}
	caller, err := protocol.VerifyRequest(r, e.lookup, e.now())
	if err != nil {
		e.refuse(w, scope.Service, shape, err.In(shape), scope.AccessKeyID)
		return
	}
	h.ServeHTTP(w, r.WithContext(protocol.WithCaller(r.Context(), caller)))
}

func (e *Edge) refuse(w http.ResponseWriter, service string, shape protocol.ErrorShape, pe *protocol.Error, accessKeyID string) {
	if e.Log != nil {
		e.Log.Info("local AWS request refused", "service", service, "accessKeyID", accessKeyID, "code", pe.Code)
	}
	writeError(w, service, shape, pe)
}

// Lookups finds a credential with the first of ls that knows the access key.
func Lookups(ls ...protocol.CredentialLookup) protocol.CredentialLookup {
	return func(akid string) (protocol.Credential, bool) {
		for _, l := range ls {
			if c, ok := l(akid); ok {
				return c, true
			}
		}
		return protocol.Credential{}, false
	}
}

// Static is a fixed set of long-term credentials by access key ID: the account's users.
type Static map[string]protocol.Credential

// Lookup finds an access key of s.
func (s Static) Lookup(akid string) (protocol.Credential, bool) {
	c, ok := s[akid]
	return c, ok
}
