package protocol

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// MaxClockSkew is how far a request's signing time may be from the server's clock,
// as AWS allows.
const MaxClockSkew = 15 * time.Minute

// amzDateLayout is X-Amz-Date's form (ISO 8601 basic, UTC).
const amzDateLayout = "20060102T150405Z"

// Scope is what a signed request says about itself: the access key and the credential
// scope (day, region, service) of its signature.
type Scope struct {
	AccessKeyID, Date, Region, Service string
	// Presigned is true when the signature is in the query (a presigned URL), false
	// when it is in the Authorization header.
	Presigned bool
}

// RequestScope returns the credential scope of a signed request, from its
// Authorization header or, for a presigned URL, its X-Amz-Credential; false when the
// request carries neither, or a malformed one.
func RequestScope(r *http.Request) (Scope, bool) {
	if a, err := parseAuthorization(r.Header.Get("Authorization")); err == nil {
		return a.scope, true
	}
	if cred := r.URL.Query().Get("X-Amz-Credential"); cred != "" {
		s, ok := parseCredential(cred)
		s.Presigned = true
		return s, ok
	}
	return Scope{}, false
}

func parseCredential(cred string) (Scope, bool) {
	p := strings.Split(cred, "/")
	if len(p) != 5 || p[4] != "aws4_request" || p[0] == "" || p[3] == "" {
		return Scope{}, false
	}
	return Scope{AccessKeyID: p[0], Date: p[1], Region: p[2], Service: p[3]}, true
}

// authorization is a parsed SigV4 Authorization header.
type authorization struct {
	scope         Scope
	signedHeaders []string
	signature     string
}

// parseAuthorization parses "AWS4-HMAC-SHA256 Credential=AKID/DATE/REGION/SERVICE/aws4_request,
// SignedHeaders=a;b, Signature=HEX".
func parseAuthorization(h string) (authorization, error) {
	rest, ok := strings.CutPrefix(h, "AWS4-HMAC-SHA256 ")
	if !ok {
		return authorization{}, fmt.Errorf("not a SigV4 authorization")
	}
	var a authorization
	var cred bool
	for part := range strings.SplitSeq(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			a.scope, cred = parseCredential(v)
		case "SignedHeaders":
			a.signedHeaders = strings.Split(v, ";")
		case "Signature":
			a.signature = v
		}
	}
	if !cred || len(a.signedHeaders) == 0 || a.signature == "" {
		return authorization{}, fmt.Errorf("authorization lacks Credential, SignedHeaders or Signature")
	}
	return a, nil
}

// AuthFailure is why a request's signature was refused.
type AuthFailure int

// The reasons VerifyRequest refuses a request.
const (
	// AuthMissing: the request is not signed.
	AuthMissing AuthFailure = iota + 1
	// AuthMalformed: the signature's parts are malformed or missing.
	AuthMalformed
	// AuthUnknownKey: the access key, or the session token sent with it, is not the account's.
	AuthUnknownKey
	// AuthBadSignature: the signature does not match the request.
	AuthBadSignature
	// AuthExpired: the temporary credentials have expired.
	AuthExpired
	// AuthSkewed: the signing time is too far from the server's clock.
	AuthSkewed
	// AuthTooLarge: the body is larger than a verifier reads.
	AuthTooLarge
)

// AuthError is a refused signature: why, and a message safe to show (never a secret).
type AuthError struct {
	Failure AuthFailure
	Message string
}

func (e *AuthError) Error() string { return e.Message }

// ErrorShape is the family of error codes a service's protocol answers with.
type ErrorShape int

// The error shapes: the Query services (STS, IAM, Auto Scaling, CloudFormation), EC2,
// and the JSON and REST-JSON services (EKS, SSM), whose codes end in Exception.
const (
	QueryShape ErrorShape = iota
	EC2Shape
	JSONShape
)

// authCodes are AWS's error codes for each failure, by shape (Query, EC2, JSON).
var authCodes = map[AuthFailure][3]string{
	AuthMissing:      {"MissingAuthenticationToken", "MissingAuthenticationToken", "MissingAuthenticationTokenException"},
	AuthMalformed:    {"IncompleteSignature", "IncompleteSignature", "IncompleteSignatureException"},
	AuthUnknownKey:   {"InvalidClientTokenId", "AuthFailure", "UnrecognizedClientException"},
	AuthBadSignature: {"SignatureDoesNotMatch", "SignatureDoesNotMatch", "InvalidSignatureException"},
	AuthExpired:      {"ExpiredToken", "ExpiredToken", "ExpiredTokenException"},
	AuthSkewed:       {"RequestTimeTooSkewed", "RequestTimeTooSkewed", "RequestTimeTooSkewed"},
	AuthTooLarge:     {"RequestEntityTooLarge", "RequestEntityTooLarge", "RequestEntityTooLargeException"},
}

// In returns the error answer of e in a service's shape.
func (e *AuthError) In(shape ErrorShape) *Error {
	status := http.StatusForbidden
	switch {
	case e.Failure == AuthMalformed:
		status = http.StatusBadRequest
	case e.Failure == AuthTooLarge:
		status = http.StatusRequestEntityTooLarge
	case e.Failure == AuthUnknownKey && shape == EC2Shape:
		status = http.StatusUnauthorized
	}
	msg := e.Message
	if e.Failure == AuthUnknownKey && shape == EC2Shape {
		msg = "AWS was not able to validate the provided access credentials"
	}
	return &Error{Status: status, Code: authCodes[e.Failure][shape], Message: msg}
}

func authErr(f AuthFailure, format string, args ...any) *AuthError {
	return &AuthError{Failure: f, Message: fmt.Sprintf(format, args...)}
}

// The messages AWS answers with.
const (
	invalidKeyMessage   = "The security token included in the request is invalid."
	badSignatureMessage = "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method."
)

// VerifyRequest verifies the SigV4 signature of a request signed in its Authorization
// header, or presigned in its query, against the credential lookup finds for its access
// key, at time now; it returns who signed it. The body is read (at most MaxVerifiedBody
// bytes) to hash it, and put back for the handler.
func VerifyRequest(r *http.Request, lookup CredentialLookup, now time.Time) (Caller, *AuthError) {
	if h := r.Header.Get("Authorization"); h != "" {
		return verifyHeaderSigned(r, h, lookup, now)
	}
	if r.URL.Query().Has("X-Amz-Credential") {
		return verifyPresigned(r, lookup, now)
	}
	return Caller{}, authErr(AuthMissing, "Request is missing Authentication Token")
}

// MaxVerifiedBody bounds the body a verifier reads to hash it.
const MaxVerifiedBody = 1 << 20

func verifyHeaderSigned(r *http.Request, h string, lookup CredentialLookup, now time.Time) (Caller, *AuthError) {
	a, err := parseAuthorization(h)
	if err != nil {
		if !strings.HasPrefix(h, "AWS4-HMAC-SHA256 ") {
			return Caller{}, authErr(AuthMalformed, "Authorization header requires the AWS4-HMAC-SHA256 algorithm")
		}
		return Caller{}, authErr(AuthMalformed, "Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' parameters, and a credential scope DATE/REGION/SERVICE/aws4_request")
	}
	if !strings.Contains(";"+strings.Join(a.signedHeaders, ";")+";", ";host;") {
		return Caller{}, authErr(AuthMalformed, "SignedHeaders must include host")
	}
	amzDate := r.Header.Get("X-Amz-Date")
	signed, err := time.Parse(amzDateLayout, amzDate)
	if err != nil {
		return Caller{}, authErr(AuthMalformed, "Authorization requires an X-Amz-Date header in the form 20060102T150405Z")
	}
	if d := now.Sub(signed); d > MaxClockSkew || d < -MaxClockSkew {
		return Caller{}, authErr(AuthSkewed, "The difference between the request time (%s) and the current time (%s) is more than 15 minutes", amzDate, now.UTC().Format(amzDateLayout))
	}
	if a.scope.Date != amzDate[:8] {
		return Caller{}, authErr(AuthBadSignature, "Date in Credential scope does not match YYYYMMDD from X-Amz-Date")
	}
	cred, aerr := credentialFor(a.scope.AccessKeyID, r.Header.Get("X-Amz-Security-Token"), lookup, now)
	if aerr != nil {
		return Caller{}, aerr
	}
	payload, aerr := payloadHash(r)
	if aerr != nil {
		return Caller{}, aerr
	}
	req := &sigv4Request{
		Method: r.Method, Path: canonicalURI(r.URL.EscapedPath()), Query: r.URL.Query(), Header: canonicalHeaders(r), Host: r.Host,
		SignedHeaders: a.signedHeaders, PayloadHash: payload,
	}
	scope := sigv4Scope{AmzDate: amzDate, Region: a.scope.Region, Service: a.scope.Service}
	want := signature(cred.Secret, scope, stringToSign(req.canonical(), scope))
	if !hmac.Equal([]byte(want), []byte(a.signature)) {
		return Caller{}, authErr(AuthBadSignature, badSignatureMessage)
	}
	return cred.Caller, nil
}

func verifyPresigned(r *http.Request, lookup CredentialLookup, now time.Time) (Caller, *AuthError) {
	q := r.URL.Query()
	scope, ok := parseCredential(q.Get("X-Amz-Credential"))
	signed, err := time.Parse(amzDateLayout, q.Get("X-Amz-Date"))
	expires, expErr := strconv.Atoi(q.Get("X-Amz-Expires"))
	if !ok || err != nil || expErr != nil || q.Get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256" || q.Get("X-Amz-Signature") == "" {
		return Caller{}, authErr(AuthMalformed, "A presigned request needs X-Amz-Algorithm AWS4-HMAC-SHA256, X-Amz-Credential, X-Amz-Date, X-Amz-Expires and X-Amz-Signature")
	}
	if now.After(signed.Add(time.Duration(expires)*time.Second)) || signed.After(now.Add(MaxClockSkew)) {
		return Caller{}, authErr(AuthBadSignature, "Signature expired or not yet valid")
	}
	cred, aerr := credentialFor(scope.AccessKeyID, q.Get("X-Amz-Security-Token"), lookup, now)
	if aerr != nil {
		return Caller{}, aerr
	}
	if !hmac.Equal([]byte(PresignedSignature(cred.Secret, scope.Region, scope.Service, r)), []byte(q.Get("X-Amz-Signature"))) {
		return Caller{}, authErr(AuthBadSignature, badSignatureMessage)
	}
	return cred.Caller, nil
}

// credentialFor finds an access key's credential; session credentials must come with
// their token, and must not have expired.
func credentialFor(akid, token string, lookup CredentialLookup, now time.Time) (Credential, *AuthError) {
	cred, ok := lookup(akid)
	if !ok || !hmac.Equal([]byte(token), []byte(cred.SessionToken)) {
		return Credential{}, authErr(AuthUnknownKey, invalidKeyMessage)
	}
	if !cred.Expiration.IsZero() && !now.Before(cred.Expiration) {
		return Credential{}, authErr(AuthExpired, "The security token included in the request is expired")
	}
	cred.Caller.AccessKey = akid
	return cred, nil
}

// payloadHash is the hex SHA-256 of the request's body, which it reads (bounded) and
// puts back. A client may send the hash in X-Amz-Content-Sha256; it must be the body's.
func payloadHash(r *http.Request) (string, *AuthError) {
	var body []byte
	if r.Body != nil {
		var err error
		body, err = io.ReadAll(io.LimitReader(r.Body, MaxVerifiedBody+1))
		_ = r.Body.Close()
		if err != nil {
			return "", authErr(AuthMalformed, "reading the request body failed")
		}
		if len(body) > MaxVerifiedBody {
			return "", authErr(AuthTooLarge, "The request body is larger than %d bytes", MaxVerifiedBody)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	sum := sha256.Sum256(body)
	computed := hex.EncodeToString(sum[:])
	if sent := r.Header.Get("X-Amz-Content-Sha256"); sent != "" && sent != computed {
		// UNSIGNED-PAYLOAD is S3's; these services sign their bodies.
		return "", authErr(AuthBadSignature, "The provided 'x-amz-content-sha256' header does not match what was computed.")
	}
	return computed, nil
}

// canonicalHeaders are the request's headers as the client signed them: Go's server
// moves Content-Length out of the header map, and the client signed it there.
func canonicalHeaders(r *http.Request) http.Header {
	if r.Header.Get("Content-Length") != "" || r.ContentLength <= 0 {
		return r.Header
	}
	h := r.Header.Clone()
	h.Set("Content-Length", strconv.FormatInt(r.ContentLength, 10))
	return h
}

// canonicalURI is the path as SigV4 signs it for every service but S3: the path as
// sent (already escaped) escaped once more, each segment on its own, '/' kept.
func canonicalURI(escaped string) string {
	if escaped == "" {
		return "/"
	}
	segs := strings.Split(escaped, "/")
	for i, s := range segs {
		segs[i] = uriEncode(s)
	}
	return strings.Join(segs, "/")
}
