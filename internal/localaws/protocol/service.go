package protocol

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Request is one Query protocol request, as a service's handler sees it.
type Request struct {
	Context context.Context
	ID      string // the request ID of the answer
	Action  string
	Form    url.Values
	Params  *Params
	// HTTP is the request as received, for what the form does not hold (a presigned
	// request's signature covers its URL and headers).
	HTTP *http.Request
}

// Handler answers one action: the document to encode as XML, or an error.
type Handler func(r *Request) (any, *Error)

// Service serves a Query protocol service from its table of actions.
type Service struct {
	Dialect Dialect
	// Actions maps each action's name to its handler.
	Actions map[string]Handler
	// WriteError writes errors in the service's shape.
	WriteError ErrorWriter
	// Unsigned answers a request that is not signed as Authorized wants.
	Unsigned *Error
	// Authorized tells whether a request carries the service's authorization; default
	// Signed. A service that checks signatures itself answers true.
	Authorized func(*http.Request) bool
	// Admit, when set, sees each authorized request first: it counts it, or fails it.
	Admit func(r *Request) *Error
	// Wrap, when set, wraps each handler's document: the Query protocol's
	// <ActionResponse> with its result and request ID (QueryResponse).
	Wrap func(r *Request, result any) any
	// UnknownAction answers an action the table lacks; default InvalidAction.
	UnknownAction func(r *Request) *Error
}

// maxBody bounds a Query protocol request body.
const maxBody = 1 << 20

// Signed tells whether a request carries a SigV4 Authorization header. The emulators
// do not check the signature itself (STS does, for the presigned requests it verifies).
func Signed(r *http.Request) bool {
	return strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ")
}

// NewRequestID returns a request ID in AWS's form, a random UUID.
func NewRequestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// ServeHTTP reads the request, finds its action in the table, and answers.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reqID := NewRequestID()
	w.Header().Set("X-Amzn-Requestid", reqID)
	authorized := s.Authorized
	if authorized == nil {
		authorized = Signed
	}
	if !authorized(r) {
		s.WriteError(w, reqID, s.Unsigned)
		return
	}
	if r.Method != http.MethodPost && r.Method != http.MethodGet {
		s.WriteError(w, reqID, Errorf(http.StatusBadRequest, "MalformedQueryString", "The request is not a Query protocol request"))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	if err := r.ParseForm(); err != nil {
		s.WriteError(w, reqID, Errorf(http.StatusBadRequest, "MalformedQueryString", "The request is not a Query protocol request"))
		return
	}
	req := &Request{Context: r.Context(), ID: reqID, Action: r.Form.Get("Action"), Form: r.Form, HTTP: r}
	if s.Admit != nil {
		if e := s.Admit(req); e != nil {
			s.WriteError(w, reqID, e)
			return
		}
	}
	h := s.Actions[req.Action]
	if h == nil {
		e := Errorf(http.StatusBadRequest, "InvalidAction", "The action %s is not valid for this web service.", req.Action)
		if s.UnknownAction != nil {
			e = s.UnknownAction(req)
		}
		s.WriteError(w, reqID, e)
		return
	}
	req.Params = ParseForm(r.Form, s.Dialect)
	out, e := h(req)
	if e != nil {
		s.WriteError(w, reqID, e)
		return
	}
	if s.Wrap != nil {
		out = s.Wrap(req, out)
	}
	WriteXML(w, http.StatusOK, out)
}

// WriteXML writes an XML document.
func WriteXML(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	if err := xml.NewEncoder(&buf).Encode(v); err != nil {
		http.Error(w, fmt.Sprintf("encoding response: %v", err), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// QueryResponse is the Query protocol's answer: <ActionResponse> with the action's
// result, if any, and the request ID.
type QueryResponse struct {
	XMLName          xml.Name
	Xmlns            string `xml:"xmlns,attr"`
	Result           any
	ResponseMetadata struct {
		RequestID string `xml:"RequestId"`
	} `xml:"ResponseMetadata"`
}

// QueryWrap is Service.Wrap for the Query protocol services of a namespace.
func QueryWrap(xmlns string) func(r *Request, result any) any {
	return func(r *Request, result any) any {
		out := QueryResponse{XMLName: xml.Name{Local: r.Action + "Response"}, Xmlns: xmlns, Result: result}
		out.ResponseMetadata.RequestID = r.ID
		return out
	}
}

// ItemSet is an EC2 list: a wrapper element holding one item element per member.
type ItemSet[T any] struct {
	Items []T `xml:"item"`
}
