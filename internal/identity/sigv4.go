package identity

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"sort"
	"strings"
)

// EmptyPayloadHash is the SHA-256 of an empty body, which a presigned GET signs.
const EmptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// uriEncode encodes as SigV4 requires: everything but A-Z a-z 0-9 - _ . ~ is %XX.
func uriEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' {
			b.WriteByte(c)
		} else {
			b.WriteString("%" + strings.ToUpper(hex.EncodeToString([]byte{c})))
		}
	}
	return b.String()
}

// PresignedSignature computes the SigV4 signature of a presigned GET request: its
// query (without X-Amz-Signature), the values of its signed headers, and the secret.
// A verifier recomputes it and compares; nothing else about the request is trusted.
func PresignedSignature(secret, region, service, host, path string, query url.Values, headers map[string]string) string {
	keys := make([]string, 0, len(query))
	for k := range query {
		if k != "X-Amz-Signature" {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return uriEncode(keys[i]) < uriEncode(keys[j]) })
	var q []string
	for _, k := range keys {
		vals := append([]string(nil), query[k]...)
		sort.Strings(vals)
		for _, v := range vals {
			q = append(q, uriEncode(k)+"="+uriEncode(v))
		}
	}
	signed := strings.Split(query.Get("X-Amz-SignedHeaders"), ";")
	var ch strings.Builder
	for _, h := range signed {
		v := headers[h]
		if h == "host" {
			v = host
		}
		ch.WriteString(h + ":" + strings.Join(strings.Fields(v), " ") + "\n")
	}
	if path == "" {
		path = "/"
	}
	canonical := strings.Join([]string{"GET", path, strings.Join(q, "&"), ch.String(), strings.Join(signed, ";"), EmptyPayloadHash}, "\n")
	amzDate := query.Get("X-Amz-Date")
	date := amzDate
	if len(date) >= 8 {
		date = date[:8]
	}
	scope := date + "/" + region + "/" + service + "/aws4_request"
	sum := sha256.Sum256([]byte(canonical))
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(sum[:])
	key := hmacSHA256([]byte("AWS4"+secret), date)
	key = hmacSHA256(key, region)
	key = hmacSHA256(key, service)
	key = hmacSHA256(key, "aws4_request")
	return hex.EncodeToString(hmacSHA256(key, toSign))
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}
