package protocol

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
)

// Page cuts one page of at most max items (0: all) from a listing, from where the
// token (NextToken, "" for the first page) says, and returns the next page's token,
// "" after the last. ok is false for a token this pager did not make.
func Page[T any](items []T, token string, max int) (page []T, next string, ok bool) {
	offset := 0
	if token != "" {
		raw, err := base64.RawURLEncoding.DecodeString(token)
		if err != nil {
			return nil, "", false
		}
		rest, found := strings.CutPrefix(string(raw), "offset:")
		n, err := strconv.Atoi(rest)
		if !found || err != nil || n < 0 {
			return nil, "", false
		}
		offset = min(n, len(items))
	}
	items = items[offset:]
	if max > 0 && len(items) > max {
		return items[:max], base64.RawURLEncoding.EncodeToString([]byte("offset:" + strconv.Itoa(offset+max))), true
	}
	return items, "", true
}

// ValidPageToken tells whether Page takes the token.
func ValidPageToken(token string) bool {
	_, _, ok := Page[struct{}](nil, token, 0)
	return ok
}

// PageRequest is the page a List or Describe action asks for.
type PageRequest struct {
	// Max is the page size; 0 is all.
	Max   int
	Token string
}

// ReadPage reads the page size parameter (EC2's MaxResults, the Query services'
// MaxRecords), lo to hi and def when not given, and NextToken, refusing them in the
// dialect's words.
func (n *Params) ReadPage(sizeParam string, lo, hi, def int64) (PageRequest, *Error) {
	var p PageRequest
	m, e := n.Int(sizeParam)
	if e != nil {
		return p, e
	}
	p.Max = int(def)
	if m != nil {
		if *m < lo || *m > hi {
			if n.dialect == Query {
				return p, ValidationError("1 validation error detected: Value '%d' at '%s' failed to satisfy constraint: Member must have value between %d and %d", *m, lowerFirst(sizeParam), lo, hi)
			}
			return p, InvalidParameter("Value ( %d ) for parameter %s is invalid. Expecting a value between %d and %d.", *m, lowerFirst(sizeParam), lo, hi)
		}
		p.Max = int(*m)
	}
	p.Token, _ = n.Str("NextToken")
	if !ValidPageToken(p.Token) {
		if n.dialect == Query {
			return p, Errorf(http.StatusBadRequest, "InvalidNextToken", "The token '%s' is invalid.", p.Token)
		}
		return p, InvalidParameter("Invalid value '%s' for nextToken", p.Token)
	}
	return p, nil
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}
