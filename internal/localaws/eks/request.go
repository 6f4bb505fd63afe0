package eks

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/nodejoin/nodejoin/internal/eksapi"
	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

// page is the page a List operation asks for.
type page struct {
	max   int
	token string
}

// maxPage is the largest page EKS's List operations give.
const maxPage = 100

// readPage reads maxResults (1 to maxPage; all when absent) and nextToken.
func readPage(q url.Values) (page, error) {
	var p page
	if s := q.Get("maxResults"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxPage {
			return p, eksapi.InvalidParameter("maxResults: %q is not a number from 1 to %d", s, maxPage)
		}
		p.max = n
	}
	p.token = q.Get("nextToken")
	if !protocol.ValidPageToken(p.token) {
		return p, eksapi.InvalidParameter("nextToken: %q is no token the local EKS gave", p.token)
	}
	return p, nil
}

// cut returns the page of items and the next page's token ("" after the last).
func (p page) cut(items []string) ([]string, string) {
	out, next, _ := protocol.Page(items, p.token, p.max)
	if out == nil {
		out = []string{}
	}
	return out, next
}

// decode reads the JSON body into v strictly: an unknown field, a value of the wrong
// type, trailing data or a body over maxBody is refused, naming what was wrong. The
// whole body is decoded before anything is applied, so a refused request changes nothing.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			return eksapi.InvalidParameter("the request body holds more than one JSON object")
		}
		return nil
	}
	var maxErr *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return eksapi.InvalidParameter("the request body is empty; want a JSON object")
	case errors.As(err, &maxErr):
		return eksapi.InvalidParameter("the request body is over %d bytes", maxBody)
	case errors.As(err, &typeErr):
		return eksapi.InvalidParameter("%s: want a JSON %s, not %s", typeErr.Field, jsonKind(typeErr.Type.Kind().String()), typeErr.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return eksapi.InvalidParameter("unknown parameter %s: the local EKS does not take it", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return eksapi.InvalidParameter("the request body is not valid JSON: %s", syntaxText(err))
}

// syntaxText is a decoding error without Go's prefix.
func syntaxText(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return se.Error() + " at byte " + strconv.FormatInt(se.Offset, 10)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

func jsonKind(goKind string) string {
	switch goKind {
	case "int32", "int", "int64", "float64":
		return "number"
	case "map", "struct":
		return "object"
	case "slice":
		return "array"
	}
	return goKind
}
