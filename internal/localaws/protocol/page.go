package protocol

import (
	"encoding/base64"
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
