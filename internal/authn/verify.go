// Package authn authenticates AWS IAM identities for kube-apiserver: a TokenReview
// webhook that checks identity tokens (k8s-aws-v1.…), asks STS who signed them, and maps
// the caller to a Kubernetes user. A node's role maps to the node identity only when the
// instance the token names is running and carries the role (node access entries,
// aws-auth); an IAM user or role maps to a person's identity only through a STANDARD
// access entry, the one source that may carry access policies and so the
// administrator's rights.
package authn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"syscall"
	"time"

	nodejoinv1alpha1 "github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/identity"
)

// Caller is who STS says signed a token.
type Caller struct {
	Account string
	// ARN as STS returns it, such as arn:aws:sts::1111:assumed-role/nodes/i-0abc or
	// arn:aws:iam::1111:user/alice.
	ARN string
	// CanonicalARN is the role's or user's IAM ARN without a path, such as
	// arn:aws:iam::1111:role/nodes.
	CanonicalARN string
	// Kind is CallerRole (a role's session) or CallerUser (an IAM user's own key).
	Kind string
	Role string // the role's name; empty for a user
	// UserID is the role's unique ID (AROA…) or the user's (AIDA…).
	UserID      string
	SessionName string // for EC2 role credentials: the instance ID
	AccessKeyID string
}

// The kinds of caller.
const (
	CallerRole = "role"
	CallerUser = "user"
)

// ErrDenied reports a token that is not accepted; the message says why.
var ErrDenied = errors.New("denied")

// ErrThrottled reports that STS refused to answer for now.
var ErrThrottled = errors.New("STS throttled the request")

// ErrUnavailable reports that STS could not be asked (transport error) or failed (HTTP
// 5xx): a retryable error, not a denial. Its message names the host and the cause only,
// never the presigned URL.
var ErrUnavailable = errors.New("STS unavailable")

// unavailable reports a failure to ask STS at host. err's text is never used: a
// *url.Error quotes the whole presigned URL, signature and session token included; the
// cause is reduced to a fixed phrase.
func unavailable(host string, err error) error {
	return fmt.Errorf("%w: calling %s: %s", ErrUnavailable, host, transportCause(err))
}

// transportCause names what went wrong in words that cannot carry the request.
func transportCause(err error) string {
	var dnsErr *net.DNSError
	var netErr net.Error
	var certErr *tls.CertificateVerificationError
	var recordErr tls.RecordHeaderError
	var alertErr tls.AlertError
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invalidCert x509.CertificateInvalidError
	switch {
	case errors.Is(err, context.Canceled):
		return "request canceled"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return "timeout"
	case errors.As(err, &dnsErr):
		return "DNS lookup failed"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "connection reset"
	case errors.As(err, &certErr), errors.As(err, &recordErr), errors.As(err, &alertErr),
		errors.As(err, &unknownCA), errors.As(err, &hostErr), errors.As(err, &invalidCert):
		return "TLS handshake failed"
	case errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	}
	return "transport error"
}

// errorCodeRE is the form of an AWS error code; anything else is not quoted.
var errorCodeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9.]{0,63}$`)

func denied(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrDenied, fmt.Sprintf(format, args...))
}

// Verifier checks tokens for one cluster.
type Verifier struct {
	ClusterID string
	// STSHosts are the STS hosts tokens may point at (such as sts.us-west-2.amazonaws.com).
	STSHosts []string
	// Endpoint, when set (https://host:port), is the cluster's own STS: every token's
	// request is sent there, with the host the token names (one of STSHosts) as its Host
	// header, which its signature covers. A local cluster sets it to its local STS, so
	// that tokens signed for AWS's public STS host (as `aws eks get-token` signs them,
	// whatever endpoint it is told) are verified without leaving the machine, and no
	// token is ever sent anywhere else.
	Endpoint string
	// HTTP calls STS; it must not follow redirects. Default: 10 s timeout, no redirects.
	HTTP *http.Client
	// Skew is how far in the future a token's date may be. Default 1 minute.
	Skew time.Duration
	Now  func() time.Time
}

func (v *Verifier) client() *http.Client {
	if v.HTTP != nil {
		return v.HTTP
	}
	return &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

var (
	assumedRoleRE = regexp.MustCompile(`^arn:(` + nodejoinv1alpha1.PartitionPattern + `):sts::(\d{12}):assumed-role/([\w+=,.@/-]+)/([\w+=,.@-]+)$`)
	iamUserRE     = regexp.MustCompile(`^arn:(` + nodejoinv1alpha1.PartitionPattern + `):iam::(\d{12}):user/(?:[\w+=,.@-]+/)*([\w+=,.@-]{1,64})$`)
)

// Verify checks the token's form, then asks STS — with this cluster's name in the
// x-k8s-aws-id header, so a token minted for another cluster fails its signature.
func (v *Verifier) Verify(ctx context.Context, token string) (*Caller, error) {
	req, err := v.Parse(token)
	if err != nil {
		return nil, err
	}
	return v.VerifyRequest(ctx, req)
}

// Parse checks a token's form only (free: no network); the error wraps ErrDenied and
// an *identity.FormatError.
func (v *Verifier) Parse(token string) (*identity.Request, error) {
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	skew := v.Skew
	if skew == 0 {
		skew = time.Minute
	}
	req, err := identity.Parse(token, v.STSHosts, now(), skew)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDenied, err)
	}
	return req, nil
}

// target is where a token's request is sent: its own URL, or on Endpoint's host.
func (v *Verifier) target(req *identity.Request) (string, error) {
	target := *req.URL
	if v.Endpoint != "" {
		ep, err := url.Parse(v.Endpoint)
		if err != nil || ep.Scheme != "https" || ep.Host == "" {
			return "", errors.New("the verifier's STS endpoint is not an https URL")
		}
		target.Host = ep.Host
	}
	return target.String(), nil
}

// VerifyRequest asks STS who signed a request that Parse accepted.
func (v *Verifier) VerifyRequest(ctx context.Context, req *identity.Request) (*Caller, error) {
	target, err := v.target(req)
	if err != nil {
		return nil, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, errors.New("building the STS request failed")
	}
	hr.Host = req.URL.Host // what the signature covers
	hr.Header.Set(identity.ClusterHeader, v.ClusterID)
	if req.Proof != "" {
		hr.Header.Set(identity.ProofHeader, req.Proof) // signed: STS refuses a swapped proof
	}
	hr.Header.Set("Accept", "application/json")
	host := req.URL.Host
	resp, err := v.client().Do(hr)
	if err != nil {
		return nil, unavailable(host, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, unavailable(host, err)
	}
	query := req.URL.Query()
	if resp.StatusCode != http.StatusOK {
		code := stsErrorCode(body, query)
		switch {
		case strings.Contains(string(body), "Throttling") || resp.StatusCode == http.StatusTooManyRequests:
			return nil, ErrThrottled
		case resp.StatusCode >= 500:
			return nil, fmt.Errorf("%w: %s answered HTTP %d (%s)", ErrUnavailable, host, resp.StatusCode, code)
		}
		return nil, denied("STS refused the token (HTTP %d, %s)", resp.StatusCode, code)
	}
	arn, userID, account, err := parseCallerIdentity(body)
	if err != nil {
		return nil, fmt.Errorf("STS answer: %w", err)
	}
	return callerOf(arn, userID, account, req.AccessKeyID, query)
}

// callerOf checks STS's answer (query holds the presigned URL's parameters, which no
// error quotes) and returns the caller it names: an assumed role or an IAM user.
func callerOf(arn, userID, account, accessKeyID string, query url.Values) (*Caller, error) {
	if u := iamUserRE.FindStringSubmatch(arn); u != nil {
		// An IAM user's own key: only a STANDARD access entry can map it (Map).
		if account != u[2] || !roleIDRE.MatchString(userID) || echoes(arn, query) {
			return nil, denied("STS answered account %s, UserID or ARN out of form for caller %s", quotable(account, query), quotable(arn, query))
		}
		return &Caller{Account: account, ARN: arn, CanonicalARN: fmt.Sprintf("arn:%s:iam::%s:user/%s", u[1], u[2], u[3]),
			Kind: CallerUser, UserID: userID, AccessKeyID: accessKeyID}, nil
	}
	m := assumedRoleRE.FindStringSubmatch(arn)
	if m == nil {
		return nil, denied("caller %s is neither an assumed role nor an IAM user (root and federated callers are not admitted)", quotable(arn, query))
	}
	if account != m[2] {
		return nil, denied("STS answered account %s for caller %s of account %s", quotable(account, query), quotable(arn, query), m[2])
	}
	roleID, session, ok := strings.Cut(userID, ":")
	if !ok || session != m[4] || !roleIDRE.MatchString(roleID) {
		return nil, denied("malformed UserID for caller %s", quotable(arn, query))
	}
	return &Caller{
		Account: account, ARN: arn, CanonicalARN: fmt.Sprintf("arn:%s:iam::%s:role/%s", m[1], m[2], m[3]),
		Kind: CallerRole, Role: m[3], UserID: roleID, SessionName: m[4], AccessKeyID: accessKeyID,
	}, nil
}

// roleIDRE is the form of an IAM unique ID (AROA… for roles).
var roleIDRE = regexp.MustCompile(`^[A-Z0-9]{4,128}$`)

// stsErrorCode extracts the error code of an STS error answer, when it has the form of
// one and does not echo the request (query holds the presigned URL's parameters).
func stsErrorCode(body []byte, query url.Values) string {
	var e struct {
		Error struct {
			Code string `xml:"Code"`
		} `xml:"Error"`
	}
	if xml.Unmarshal(body, &e) == nil && errorCodeRE.MatchString(e.Error.Code) && !echoes(e.Error.Code, query) {
		return e.Error.Code
	}
	return "unknown error"
}

// echoes reports whether s shares text with the request's parameters: it is part of a
// parameter's value (or name), or holds a value of eight characters or more (a
// signature, a session token, an access key).
func echoes(s string, query url.Values) bool {
	for k, vs := range query {
		if strings.Contains(k, s) {
			return true
		}
		for _, v := range vs {
			if strings.Contains(v, s) || (len(v) >= 8 && strings.Contains(s, v)) {
				return true
			}
			// A session token or signature may be echoed in part.
			for i := 0; i+16 <= len(v); i += 8 {
				if strings.Contains(s, v[i:i+16]) {
					return true
				}
			}
		}
	}
	return false
}

// quotable returns s for an error message, unless it echoes the request.
func quotable(s string, query url.Values) string {
	if s == "" || echoes(s, query) {
		return "(not quoted: it repeats the request)"
	}
	return s
}

// parseCallerIdentity reads GetCallerIdentity's answer in JSON or XML.
func parseCallerIdentity(body []byte) (arn, userID, account string, err error) {
	var js struct {
		GetCallerIdentityResponse struct {
			GetCallerIdentityResult struct {
				Arn     string `json:"Arn"`
				UserID  string `json:"UserId"`
				Account string `json:"Account"`
			}
		}
	}
	if json.Unmarshal(body, &js) == nil && js.GetCallerIdentityResponse.GetCallerIdentityResult.Arn != "" {
		r := js.GetCallerIdentityResponse.GetCallerIdentityResult
		return r.Arn, r.UserID, r.Account, nil
	}
	var x struct {
		Result struct {
			Arn     string `xml:"Arn"`
			UserID  string `xml:"UserId"`
			Account string `xml:"Account"`
		} `xml:"GetCallerIdentityResult"`
	}
	if err := xml.Unmarshal(body, &x); err != nil || x.Result.Arn == "" {
		return "", "", "", errors.New("no GetCallerIdentityResult")
	}
	return x.Result.Arn, x.Result.UserID, x.Result.Account, nil
}
