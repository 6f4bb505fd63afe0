package protocol

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// emptyPayloadHash is the SHA-256 of an empty body, which a presigned GET signs.
const emptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// sigv4Request is what Signature Version 4 signs of a request.
type sigv4Request struct {
	Method string
	// Path is the request's path as sent (escaped); "" is "/".
	Path string
	// Query is the request's query, without X-Amz-Signature.
	Query url.Values
	// Header holds the request's headers; Host is the Host header's value.
	Header http.Header
	Host   string
	// SignedHeaders are the lower-case names of the headers the signature covers.
	SignedHeaders []string
	// PayloadHash is the hex SHA-256 of the body (or what the request says it signs instead).
	PayloadHash string
}

// sigv4Scope is where a signature is valid: a day, a region and a service.
type sigv4Scope struct {
	// AmzDate is the signing time, as X-Amz-Date writes it (20150830T123600Z).
	AmzDate         string
	Region, Service string
}

func (s sigv4Scope) date() string {
	if len(s.AmzDate) >= 8 {
		return s.AmzDate[:8]
	}
	return s.AmzDate
}

func (s sigv4Scope) String() string {
	return s.date() + "/" + s.Region + "/" + s.Service + "/aws4_request"
}

// uriEncode encodes as SigV4 requires: everything but A-Z a-z 0-9 - _ . ~ is %XX.
func uriEncode(s string) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' {
			b.WriteByte(c)
		} else {
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&0xf])
		}
	}
	return b.String()
}

// canonicalQuery is the query's parameters, encoded, sorted by name and then value.
func canonicalQuery(q url.Values) string {
	type pair struct{ k, v string }
	var pairs []pair
	for k, vs := range q {
		for _, v := range vs {
			pairs = append(pairs, pair{uriEncode(k), uriEncode(v)})
		}
	}
	slices.SortFunc(pairs, func(a, b pair) int { return cmp.Or(strings.Compare(a.k, b.k), strings.Compare(a.v, b.v)) })
	out := make([]string, len(pairs))
	for i, p := range pairs {
		out[i] = p.k + "=" + p.v
	}
	return strings.Join(out, "&")
}

// canonicalHeaderValue joins a header's values with commas, each trimmed and with its
// runs of spaces made one.
func canonicalHeaderValue(vs []string) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = strings.Join(strings.Fields(v), " ")
	}
	return strings.Join(out, ",")
}

// canonical returns the canonical request.
func (r *sigv4Request) canonical() string {
	var ch strings.Builder
	for _, h := range r.SignedHeaders {
		vs := r.Header.Values(h)
		if h == "host" {
			vs = []string{r.Host}
		}
		ch.WriteString(h + ":" + canonicalHeaderValue(vs) + "\n")
	}
	path := r.Path
	if path == "" {
		path = "/"
	}
	return strings.Join([]string{r.Method, path, canonicalQuery(r.Query), ch.String(), strings.Join(r.SignedHeaders, ";"), r.PayloadHash}, "\n")
}

// stringToSign is what the signing key signs: the algorithm, time, scope and the hash of
// the canonical request.
func stringToSign(canonical string, scope sigv4Scope) string {
	sum := sha256.Sum256([]byte(canonical))
	return "AWS4-HMAC-SHA256\n" + scope.AmzDate + "\n" + scope.String() + "\n" + hex.EncodeToString(sum[:])
}

// signature is the hex signature of a string to sign, with the key derived from the
// secret for the scope.
func signature(secret string, scope sigv4Scope, toSign string) string {
	key := hmacSHA256([]byte("AWS4"+secret), scope.date())
	key = hmacSHA256(key, scope.Region)
	key = hmacSHA256(key, scope.Service)
	key = hmacSHA256(key, "aws4_request")
	return hex.EncodeToString(hmacSHA256(key, toSign))
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// PresignedSignature computes the SigV4 signature of a presigned GET request from its
// query (X-Amz-Signature is left out; X-Amz-Date and X-Amz-SignedHeaders are read), its
// headers and the secret. A verifier recomputes it and compares; nothing else about the
// request is trusted.
func PresignedSignature(secret, region, service string, r *http.Request) string {
	req, scope := presigned(region, service, r)
	return signature(secret, scope, stringToSign(req.canonical(), scope))
}

// presigned is what the signature of a presigned GET request signs, and its scope.
func presigned(region, service string, r *http.Request) (*sigv4Request, sigv4Scope) {
	q := r.URL.Query()
	q.Del("X-Amz-Signature")
	req := &sigv4Request{
		Method: http.MethodGet, Path: r.URL.EscapedPath(), Query: q, Header: r.Header, Host: r.Host,
		SignedHeaders: strings.Split(q.Get("X-Amz-SignedHeaders"), ";"), PayloadHash: emptyPayloadHash,
	}
	return req, sigv4Scope{AmzDate: q.Get("X-Amz-Date"), Region: region, Service: service}
}
