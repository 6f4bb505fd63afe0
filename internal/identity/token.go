// Package identity mints and checks node identity tokens in the format of
// aws-iam-authenticator and `aws eks get-token`: "k8s-aws-v1." followed by the unpadded
// base64url of a presigned STS GetCallerIdentity URL that signs the header
// x-k8s-aws-id: <cluster>.
package identity

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Token format constants.
const (
	Prefix        = "k8s-aws-v1."
	ClusterHeader = "x-k8s-aws-id"
	maxTokenLen   = 4096
	// Lifetime is how long STS accepts a presigned GetCallerIdentity URL.
	Lifetime = 15 * time.Minute
	dateFmt  = "20060102T150405Z"
)

// Mint presigns STS GetCallerIdentity with the SDK configuration's credentials (an
// instance role's, from instance metadata, on a node) and returns the token and when
// the client should stop using it (one minute before STS would refuse it).
func Mint(ctx context.Context, cfg aws.Config, clusterID string) (string, time.Time, error) {
	return MintWithProof(ctx, cfg, clusterID, nil)
}

// MintWithProof is Mint with, when proof is not nil, the instance's identity document
// and signature in the signed header ProofHeader (see Proof), carried in the token as
// the query parameter ProofParam.
func MintWithProof(ctx context.Context, cfg aws.Config, clusterID string, proof *Proof) (string, time.Time, error) {
	if clusterID == "" {
		return "", time.Time{}, errors.New("no cluster name to bind the token to")
	}
	presign := sts.NewPresignClient(sts.NewFromConfig(cfg))
	apiOpts := []func(*middleware.Stack) error{
		smithyhttp.SetHeaderValue(ClusterHeader, clusterID),
		smithyhttp.SetHeaderValue("X-Amz-Expires", "60"),
	}
	enc := ""
	if proof != nil {
		enc = proof.Encode()
		apiOpts = append(apiOpts, smithyhttp.SetHeaderValue(ProofHeader, enc))
	}
	req, err := presign.PresignGetCallerIdentity(ctx, &sts.GetCallerIdentityInput{}, func(o *sts.PresignOptions) {
		o.ClientOptions = append(o.ClientOptions, sts.WithAPIOptions(apiOpts...))
	})
	if err != nil {
		return "", time.Time{}, fmt.Errorf("presigning STS GetCallerIdentity: %w", err)
	}
	u := req.URL
	if proof != nil {
		// Added after signing: the signature covers the header, not this parameter.
		u += "&" + ProofParam + "=" + enc
	}
	return Prefix + base64.RawURLEncoding.EncodeToString([]byte(u)), time.Now().Add(Lifetime - time.Minute), nil
}

// FormatError is a token that is not well-formed; the message says how.
type FormatError struct{ Msg string }

func (e *FormatError) Error() string { return "input token was not properly formatted: " + e.Msg }

func formatErr(format string, args ...any) error {
	return &FormatError{Msg: fmt.Sprintf(format, args...)}
}

// Request is a token's presigned request, checked for form.
type Request struct {
	URL         *url.URL
	Query       url.Values
	AccessKeyID string
	Region      string
	Date        time.Time
	// Proof is the value of the signed header ProofHeader (an encoded Proof, not yet
	// decoded), taken out of URL's query; "" when the token carries none.
	Proof string
}

var allowedParams = map[string]bool{
	"action": true, "version": true, "x-amz-algorithm": true, "x-amz-credential": true, "x-amz-date": true,
	"x-amz-expires": true, "x-amz-security-token": true, "x-amz-signature": true, "x-amz-signedheaders": true,
	"x-nodejoin-iid": true,
}

// Parse checks a token's form in aws-iam-authenticator's order, and more: the prefix,
// size, base64, https, a host in hosts, the path, known and single-valued query
// parameters with no case-variant duplicates, the action, a signed x-k8s-aws-id header,
// X-Amz-Expires, and a date neither older than 15 minutes nor more than skew in the
// future. The signature is for STS to check. Errors never quote the token.
func Parse(token string, hosts []string, now time.Time, skew time.Duration) (*Request, error) {
	if len(token) > maxProofTokenLen {
		return nil, formatErr("token is too large")
	}
	enc, ok := strings.CutPrefix(token, Prefix)
	if !ok {
		return nil, formatErr("token is missing expected %q prefix", Prefix)
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return nil, formatErr("token is not unpadded base64url")
	}
	u, err := url.Parse(string(raw))
	if err != nil {
		return nil, formatErr("pre-signed URL does not parse")
	}
	if u.Scheme != "https" {
		return nil, formatErr("unexpected scheme %q in pre-signed URL", u.Scheme)
	}
	if !hostAllowed(u.Host, hosts) {
		return nil, formatErr("unexpected hostname %q in pre-signed URL", u.Host)
	}
	if u.Path != "/" {
		return nil, formatErr("unexpected path in pre-signed URL")
	}
	q, date, err := checkQuery(u.RawQuery, now, skew)
	if err != nil {
		return nil, err
	}
	proof := getFold(q, ProofParam)
	if proof == "" && len(token) > maxTokenLen {
		return nil, formatErr("token is too large")
	}
	if proof != "" {
		u.RawQuery = withoutParam(u.RawQuery, ProofParam)
		for k := range q {
			if strings.EqualFold(k, ProofParam) {
				q.Del(k)
			}
		}
	}
	cred := strings.Split(q.Get("X-Amz-Credential"), "/")
	if len(cred) != 5 || cred[3] != "sts" || cred[4] != "aws4_request" || q.Get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256" {
		return nil, formatErr("malformed X-Amz-Credential or X-Amz-Algorithm in pre-signed URL")
	}
	return &Request{URL: u, Query: q, AccessKeyID: cred[0], Region: cred[2], Date: date, Proof: proof}, nil
}

// withoutParam is rawQuery without the parameter name (which checkQuery let occur once).
func withoutParam(rawQuery, name string) string {
	var kept []string
	for _, kv := range strings.Split(rawQuery, "&") {
		k, _, _ := strings.Cut(kv, "=")
		if uk, err := url.QueryUnescape(k); err == nil && strings.EqualFold(uk, name) {
			continue
		}
		kept = append(kept, kv)
	}
	return strings.Join(kept, "&")
}

// checkQuery checks the presigned query's parameters, action, signed headers, expiry
// and date.
func checkQuery(rawQuery string, now time.Time, skew time.Duration) (url.Values, time.Time, error) {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, time.Time{}, formatErr("malformed query parameter")
	}
	seen := map[string]bool{}
	for k, v := range q {
		lk := strings.ToLower(k)
		if seen[lk] {
			return nil, time.Time{}, formatErr("duplicate query parameter found: %q", k)
		}
		seen[lk] = true
		if !allowedParams[lk] {
			return nil, time.Time{}, formatErr("non-whitelisted query parameter %q", k)
		}
		if len(v) != 1 {
			return nil, time.Time{}, formatErr("query parameter with multiple values not supported")
		}
	}
	if q.Get("Action") != "GetCallerIdentity" {
		return nil, time.Time{}, formatErr("unexpected action parameter in pre-signed URL")
	}
	if err := checkSignedHeaders(q); err != nil {
		return nil, time.Time{}, err
	}
	if exp, err := strconv.Atoi(q.Get("X-Amz-Expires")); err != nil || exp < 0 || exp > 900 {
		return nil, time.Time{}, formatErr("invalid X-Amz-Expires parameter in pre-signed URL: %q", q.Get("X-Amz-Expires"))
	}
	if q.Get("X-Amz-Date") == "" {
		return nil, time.Time{}, formatErr("X-Amz-Date parameter must be present in pre-signed URL")
	}
	date, err := time.Parse(dateFmt, q.Get("X-Amz-Date"))
	if err != nil {
		return nil, time.Time{}, formatErr("X-Amz-Date parameter is not a date")
	}
	if now.After(date.Add(Lifetime)) {
		return nil, time.Time{}, formatErr("X-Amz-Date parameter is expired (15 minute expiration) %s", q.Get("X-Amz-Date"))
	}
	if date.After(now.Add(skew)) {
		return nil, time.Time{}, formatErr("X-Amz-Date parameter %s is in the future (more than %s ahead)", q.Get("X-Amz-Date"), skew)
	}
	return q, date, nil
}

// checkSignedHeaders requires the cluster header to be signed, and the proof header to
// be signed exactly when the token carries a proof.
func checkSignedHeaders(q url.Values) error {
	signedCluster, signedProof := false, false
	for _, h := range strings.Split(q.Get("X-Amz-SignedHeaders"), ";") {
		signedCluster = signedCluster || strings.EqualFold(h, ClusterHeader)
		signedProof = signedProof || strings.EqualFold(h, ProofHeader)
	}
	if !signedCluster {
		return formatErr("client did not sign the x-k8s-aws-id header in the pre-signed URL")
	}
	// A proof counts only if the signature covers it, so that it cannot be moved to
	// another token; a signed proof header without the proof cannot verify.
	switch hasProof := getFold(q, ProofParam) != ""; {
	case hasProof && !signedProof:
		return formatErr("client did not sign the %s header that carries the instance proof", ProofHeader)
	case !hasProof && signedProof:
		return formatErr("the %s header is signed but the token carries no instance proof", ProofHeader)
	}
	return nil
}

// getFold is the value of the query parameter name in any case (checkQuery refused
// case-variant duplicates).
func getFold(q url.Values, name string) string {
	for k, v := range q {
		if strings.EqualFold(k, name) && len(v) == 1 {
			return v[0]
		}
	}
	return ""
}

func hostAllowed(host string, hosts []string) bool {
	for _, h := range hosts {
		if strings.EqualFold(h, host) {
			return true
		}
	}
	return false
}
