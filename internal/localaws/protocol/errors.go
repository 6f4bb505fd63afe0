package protocol

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
)

// Error is an error answer: the HTTP status and AWS's error code and message.
type Error struct {
	Status        int
	Code, Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf returns an error answer with a formatted message.
func Errorf(status int, code, format string, args ...any) *Error {
	return &Error{status, code, fmt.Sprintf(format, args...)}
}

// InvalidParameter is EC2's InvalidParameterValue.
func InvalidParameter(format string, args ...any) *Error {
	return Errorf(http.StatusBadRequest, "InvalidParameterValue", format, args...)
}

// ValidationError is the Query services' ValidationError.
func ValidationError(format string, args ...any) *Error {
	return Errorf(http.StatusBadRequest, "ValidationError", format, args...)
}

// MissingParameter refuses a request without a parameter it needs.
func MissingParameter(name string) *Error {
	return Errorf(http.StatusBadRequest, "MissingParameter", "The request must contain the parameter %s", name)
}

// ErrorWriter writes an error answer in a service's shape.
type ErrorWriter func(w http.ResponseWriter, requestID string, e *Error)

type ec2ErrorResponse struct {
	XMLName xml.Name `xml:"Response"`
	Errors  []struct {
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	} `xml:"Errors>Error"`
	RequestID string `xml:"RequestID"`
}

// WriteEC2Error writes EC2's error document: Response/Errors/Error{Code,Message}.
func WriteEC2Error(w http.ResponseWriter, requestID string, e *Error) {
	out := ec2ErrorResponse{RequestID: requestID}
	out.Errors = append(out.Errors, struct {
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	}{e.Code, e.Message})
	WriteXML(w, e.Status, out)
}

type queryErrorResponse struct {
	XMLName xml.Name `xml:"ErrorResponse"`
	Xmlns   string   `xml:"xmlns,attr,omitempty"`
	Error   struct {
		Type    string `xml:"Type"`
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	} `xml:"Error"`
	RequestID string `xml:"RequestId,omitempty"`
}

// QueryErrorWriter writes the Query protocol's ErrorResponse in a service's namespace:
// Type Sender, or Receiver for a server error.
func QueryErrorWriter(xmlns string) ErrorWriter {
	return func(w http.ResponseWriter, requestID string, e *Error) {
		out := queryErrorResponse{Xmlns: xmlns, RequestID: requestID}
		out.Error.Type, out.Error.Code, out.Error.Message = "Sender", e.Code, e.Message
		if e.Status >= 500 {
			out.Error.Type = "Receiver"
		}
		WriteXML(w, e.Status, out)
	}
}

// WriteJSONError writes the JSON protocols' error: the type in __type and in the
// X-Amzn-ErrorType header.
func WriteJSONError(w http.ResponseWriter, e *Error) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-Errortype", e.Code)
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": e.Code, "message": e.Message})
}
