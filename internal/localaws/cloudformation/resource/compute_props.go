package resource

// This file holds what the compute and EKS resource types share: reading a resource's
// resolved properties with CloudFormation's validation messages, turning a service's
// refusal into the message CloudFormation's resource handlers write, generated
// physical names, and the poll interval of long operations.

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
)

// resourcePollInterval is how often the compute and EKS types poll a service while
// they wait (an Auto Scaling group's instances, a node group's status, an update);
// tests shrink it.
var resourcePollInterval = 2 * time.Second

// propReader reads one resource's properties; the first fault is kept in err, in
// CloudFormation's words ("Properties validation failed for resource NodeGroup with
// message: #/MinSize: expected type: Integer, found: String"), so that a chain of reads
// is checked once.
type propReader struct {
	logicalID string
	err       error
}

func newPropReader(c *Call) *propReader { return &propReader{logicalID: c.LogicalID} }

// fail records the first fault, at path (such as #/LaunchTemplate/Version).
func (p *propReader) fail(path, format string, args ...any) {
	if p.err == nil {
		p.err = handlerErrorf("Properties validation failed for resource %s with message: %s: %s", p.logicalID, path, fmt.Sprintf(format, args...))
	}
}

// known fails on a key of m that is not one of keys, as CloudFormation refuses an
// extraneous key, naming the keys it takes.
func (p *propReader) known(m map[string]any, path string, keys ...string) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(keys, k) {
			p.fail(path, "extraneous key [%s] is not permitted (this resource type takes %s)", k, strings.Join(keys, ", "))
			return
		}
	}
}

// required fails when key is absent from m.
func (p *propReader) required(m map[string]any, path string, keys ...string) {
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			p.fail(path, "required key [%s] not found", k)
			return
		}
	}
}

func propTypeName(v any) string {
	switch v.(type) {
	case map[string]any:
		return "JSONObject"
	case []any:
		return "JSONArray"
	case nil:
		return "null"
	default:
		return "String"
	}
}

// propScalar is a scalar property as a string (the engine passes every scalar as one;
// numbers and booleans of other callers are accepted too).
func propScalar(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case bool:
		return strconv.FormatBool(x), true
	case int:
		return strconv.Itoa(x), true
	case int64:
		return strconv.FormatInt(x, 10), true
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	}
	return "", false
}

// strPtr reads a string property (nil when absent).
func (p *propReader) strPtr(m map[string]any, path, key string) *string {
	v, ok := m[key]
	if !ok {
		return nil
	}
	s, ok := propScalar(v)
	if !ok {
		p.fail(path+"/"+key, "expected type: String, found: %s", propTypeName(v))
		return nil
	}
	return &s
}

// str reads a string property ("" when absent).
func (p *propReader) str(m map[string]any, path, key string) string {
	if s := p.strPtr(m, path, key); s != nil {
		return *s
	}
	return ""
}

// int32Ptr reads an integer property (nil when absent).
func (p *propReader) int32Ptr(m map[string]any, path, key string) *int32 {
	s := p.strPtr(m, path, key)
	if s == nil {
		return nil
	}
	n, err := strconv.ParseInt(*s, 10, 32)
	if err != nil {
		p.fail(path+"/"+key, "expected type: Integer, found: %q", *s)
		return nil
	}
	v := int32(n)
	return &v
}

// boolPtr reads a boolean property (nil when absent).
func (p *propReader) boolPtr(m map[string]any, path, key string) *bool {
	s := p.strPtr(m, path, key)
	if s == nil {
		return nil
	}
	switch strings.ToLower(*s) {
	case "true":
		return new(true)
	case "false":
		return new(false)
	}
	p.fail(path+"/"+key, "expected type: Boolean, found: %q", *s)
	return nil
}

// obj reads an object property (nil when absent).
func (p *propReader) obj(m map[string]any, path, key string) map[string]any {
	v, ok := m[key]
	if !ok {
		return nil
	}
	o, ok := v.(map[string]any)
	if !ok {
		p.fail(path+"/"+key, "expected type: JSONObject, found: %s", propTypeName(v))
		return nil
	}
	return o
}

// objList reads a list of objects.
func (p *propReader) objList(m map[string]any, path, key string) []map[string]any {
	v, ok := m[key]
	if !ok {
		return nil
	}
	l, ok := v.([]any)
	if !ok {
		p.fail(path+"/"+key, "expected type: JSONArray, found: %s", propTypeName(v))
		return nil
	}
	out := make([]map[string]any, 0, len(l))
	for i, e := range l {
		o, ok := e.(map[string]any)
		if !ok {
			p.fail(fmt.Sprintf("%s/%s/%d", path, key, i), "expected type: JSONObject, found: %s", propTypeName(e))
			return nil
		}
		out = append(out, o)
	}
	return out
}

// strList reads a list of strings (a comma-delimited string is one too, as
// CloudFormation accepts a List<AWS::EC2::Subnet::Id> parameter's value).
func (p *propReader) strList(m map[string]any, path, key string) []string {
	v, ok := m[key]
	if !ok {
		return nil
	}
	if s, ok := v.(string); ok {
		var out []string
		for part := range strings.SplitSeq(s, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
		return out
	}
	l, ok := v.([]any)
	if !ok {
		p.fail(path+"/"+key, "expected type: JSONArray, found: %s", propTypeName(v))
		return nil
	}
	out := make([]string, 0, len(l))
	for i, e := range l {
		s, ok := propScalar(e)
		if !ok {
			p.fail(fmt.Sprintf("%s/%s/%d", path, key, i), "expected type: String, found: %s", propTypeName(e))
			return nil
		}
		out = append(out, s)
	}
	return out
}

// strMap reads an object of strings (labels, tags).
func (p *propReader) strMap(m map[string]any, path, key string) map[string]string {
	o := p.obj(m, path, key)
	if o == nil {
		return nil
	}
	out := make(map[string]string, len(o))
	for k, v := range o {
		s, ok := propScalar(v)
		if !ok {
			p.fail(path+"/"+key+"/"+k, "expected type: String, found: %s", propTypeName(v))
			return nil
		}
		out[k] = s
	}
	return out
}

// handlerError is a service's refusal as CloudFormation reports what its resource
// handler got back: the service's message, with its code, status and request ID.
type handlerError struct {
	msg string
	err error
}

func (e *handlerError) Error() string { return e.msg }

// handlerErrorf is a handlerError of a message in CloudFormation's words (capitalised
// and punctuated as AWS writes them); %w wraps as fmt.Errorf does.
func handlerErrorf(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &handlerError{msg: err.Error(), err: errors.Unwrap(err)}
}

// toInt32 is n as an int32, clamped (sizes and counts are far smaller).
func toInt32(n int) int32 {
	if n > math.MaxInt32 {
		return math.MaxInt32
	}
	if n < math.MinInt32 {
		return math.MinInt32
	}
	return int32(n)
}
func (e *handlerError) Unwrap() error { return e.err }

// serviceFailure says what a service answered a call; a failure to reach the service is
// said without the transport's own error text (which names local addresses).
func serviceFailure(service string, err error) error {
	if err == nil {
		return nil
	}
	var api smithy.APIError
	if !errors.As(err, &api) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return &handlerError{msg: "Resource handler returned message: \"the operation was cancelled before " + service + " answered\"", err: err}
		}
		return &handlerError{msg: "Resource handler returned message: \"" + service + " could not be reached\" (HandlerErrorCode: ServiceInternalError)", err: err}
	}
	status, id := 0, ""
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		status, id = re.HTTPStatusCode(), re.ServiceRequestID()
	}
	return &handlerError{msg: fmt.Sprintf("Resource handler returned message: %q (Service: %s, Status Code: %d, Request ID: %s)",
		cmp.Or(api.ErrorMessage(), api.ErrorCode()), service, status, id), err: err}
}

// serviceErrorCode is the AWS error code of err ("" when it is not a service's answer).
func serviceErrorCode(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

const nameAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// physicalSuffix is the random part of a generated physical name, as CloudFormation
// makes one (upper-case letters and digits).
func physicalSuffix(n int) string {
	b := make([]byte, n)
	for i := range b {
		k, err := rand.Int(rand.Reader, big.NewInt(int64(len(nameAlphabet))))
		if err != nil {
			panic(err) // crypto/rand does not fail on supported platforms
		}
		b[i] = nameAlphabet[k.Int64()]
	}
	return string(b)
}

// sortedTagKeys are a tag map's keys, sorted, for deterministic requests.
func sortedTagKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }

// sleepOrDone sleeps d or until ctx ends.
func sleepOrDone(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
