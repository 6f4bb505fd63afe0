package template

import (
	"encoding/base64"
	"errors"
	"slices"
	"strconv"
	"strings"
)

// Env is what evaluation sees of the stack and the account.
type Env struct {
	// Parameters are the bound parameters (BindParameters); List<...> and
	// CommaDelimitedList values comma-joined.
	Parameters                            map[string]string
	AccountID, Region, StackName, StackID string
	// Partition and URLSuffix default to "aws" and "amazonaws.com".
	Partition, URLSuffix string
	// Zones are what Fn::GetAZs returns for the stack's region.
	Zones []string
	// Conditions are EvalConditions' result; a condition missing here is evaluated
	// when needed.
	Conditions map[string]bool
	// Resource returns a made resource's Ref value and attributes; ok false if it is
	// not made (yet, or at all because its condition is false).
	Resource func(logicalID string) (ref string, attrs map[string]string, ok bool)
	// Import returns the value of another stack's export; nil finds none.
	Import func(exportName string) (string, bool)
}

// noValue is what Ref AWS::NoValue evaluates to: its key or list item is removed.
type noValue struct{}

// evaluator evaluates one expression tree.
type evaluator struct {
	t   *Template
	env *Env
	// evaluating guards against conditions that refer to themselves in a template
	// that was not validated; known holds the conditions evaluated so far, so
	// conditions that name each other cost one evaluation each.
	evaluating map[string]bool
	known      map[string]bool
}

// newEvaluator returns an evaluator over env (nil: an empty one).
func (t *Template) newEvaluator(env *Env) *evaluator {
	if env == nil {
		env = &Env{}
	}
	return &evaluator{t: t, env: env, evaluating: map[string]bool{}, known: map[string]bool{}}
}

// EvalConditions evaluates every condition of the template.
func (t *Template) EvalConditions(env *Env) (map[string]bool, error) {
	e := t.newEvaluator(env)
	out := map[string]bool{}
	for _, name := range sortedKeys(t.Conditions) {
		b, err := e.condition(name, join("Conditions", name))
		if err != nil {
			return nil, t.redact(err, env)
		}
		out[name] = b
	}
	return out, nil
}

// Eval resolves every intrinsic function in v and returns the plain tree:
// map[string]any, []any and string scalars (numbers in shortest decimal form,
// booleans "true"/"false"). Ref AWS::NoValue removes its key or list item (and makes
// the whole result nil when v is that Ref). Errors are *Error with the path inside v.
func (t *Template) Eval(v any, env *Env) (any, error) {
	return t.EvalAt("", v, env)
}

// EvalAt is Eval of the expression at path (such as
// Resources.NodeGroup.Properties), which errors name.
func (t *Template) EvalAt(path string, v any, env *Env) (any, error) {
	e := t.newEvaluator(env)
	out, err := e.eval(v, path)
	if err != nil {
		return nil, t.redact(err, env)
	}
	if _, ok := out.(noValue); ok {
		return nil, nil
	}
	return out, nil
}

// EvalResource evaluates a resource's Properties, CreationPolicy and UpdatePolicy
// (each nil when absent).
func (t *Template) EvalResource(logicalID string, env *Env) (props, creation, update map[string]any, err error) {
	r, ok := t.Resources[logicalID]
	if !ok {
		return nil, nil, nil, templateError("", "no resource %s in the template", logicalID)
	}
	path := join("Resources", logicalID)
	parts := []map[string]any{r.Properties, r.CreationPolicy, r.UpdatePolicy}
	keys := []string{"Properties", "CreationPolicy", "UpdatePolicy"}
	out := make([]map[string]any, 3)
	for i, p := range parts {
		if p == nil {
			continue
		}
		v, err := t.EvalAt(join(path, keys[i]), p, env)
		if err != nil {
			return nil, nil, nil, err
		}
		out[i], _ = v.(map[string]any)
	}
	return out[0], out[1], out[2], nil
}

// redact replaces NoEcho parameter values in an error's message, so none is shown.
func (t *Template) redact(err error, env *Env) error {
	var e *Error
	if !errors.As(err, &e) || env == nil {
		return err
	}
	var secrets []string
	for name, p := range t.Parameters {
		if v := env.Parameters[name]; p.NoEcho && v != "" {
			secrets = append(secrets, v)
		}
	}
	// The longest first, so a secret inside another is not left half shown.
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	for _, v := range secrets {
		e.Message = strings.ReplaceAll(e.Message, v, "****")
	}
	return e
}

func (e *evaluator) eval(v any, path string) (any, error) {
	if fn, arg, ok := intrinsic(v, false); ok {
		return e.call(fn, arg, join(path, fn))
	}
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for _, k := range sortedKeys(v) {
			r, err := e.eval(v[k], join(path, k))
			if err != nil {
				return nil, err
			}
			if _, drop := r.(noValue); !drop {
				out[k] = r
			}
		}
		return out, nil
	case []any:
		out := make([]any, 0, len(v))
		for i, it := range v {
			r, err := e.eval(it, index(path, i))
			if err != nil {
				return nil, err
			}
			if _, drop := r.(noValue); !drop {
				out = append(out, r)
			}
		}
		return out, nil
	case string:
		return v, nil
	case nil:
		return nil, nullError(path)
	}
	return nil, templateError(path, "unexpected value")
}

// str evaluates v to a string.
func (e *evaluator) str(v any, path, what string) (string, error) {
	r, err := e.eval(v, path)
	if err != nil {
		return "", err
	}
	s, ok := r.(string)
	if !ok {
		return "", templateError(path, "%s must be a string", what)
	}
	return s, nil
}

// strings evaluates v to a list of strings.
func (e *evaluator) strings(v any, path, what string) ([]string, error) {
	r, err := e.eval(v, path)
	if err != nil {
		return nil, err
	}
	l, ok := r.([]any)
	if !ok {
		return nil, templateError(path, "%s must be a list of strings", what)
	}
	out := make([]string, len(l))
	for i, it := range l {
		s, ok := it.(string)
		if !ok {
			return nil, templateError(index(path, i), "%s must be a list of strings", what)
		}
		out[i] = s
	}
	return out, nil
}

// evaluators evaluate each function (set in init: they call eval, which uses them).
var evaluators map[string]func(e *evaluator, arg any, path string) (any, error)

func init() {
	boolean := func(fn string) func(*evaluator, any, string) (any, error) {
		return func(e *evaluator, arg any, path string) (any, error) {
			b, err := e.boolean(map[string]any{fn: arg}, strings.TrimSuffix(path, "."+fn))
			if err != nil {
				return nil, err
			}
			return strconv.FormatBool(b), nil
		}
	}
	evaluators = map[string]func(*evaluator, any, string) (any, error){
		"Ref": func(e *evaluator, arg any, path string) (any, error) {
			name, _ := arg.(string)
			return e.ref(name, path)
		},
		"Fn::GetAtt": (*evaluator).getAtt, "Fn::Sub": (*evaluator).sub, "Fn::Join": (*evaluator).join,
		"Fn::Split": (*evaluator).split, "Fn::Select": (*evaluator).sel, "Fn::If": (*evaluator).ifThen,
		"Fn::FindInMap": (*evaluator).findInMap, "Fn::Base64": (*evaluator).base64, "Fn::GetAZs": (*evaluator).getAZs,
		"Fn::ImportValue": (*evaluator).importValue, "Fn::Cidr": (*evaluator).cidr,
		"Fn::Equals": boolean("Fn::Equals"), "Fn::Not": boolean("Fn::Not"), "Fn::And": boolean("Fn::And"),
		"Fn::Or": boolean("Fn::Or"), "Condition": boolean("Condition"),
	}
}

func (e *evaluator) call(fn string, arg any, path string) (any, error) {
	if f, ok := evaluators[fn]; ok {
		return f(e, arg, path)
	}
	return nil, templateError(path, "Encountered unsupported function: %s Supported functions are: [%s]", fn, strings.Join(functions, ", "))
}

func (e *evaluator) join(arg any, path string) (any, error) {
	args, ok := list(arg, 2)
	if !ok {
		return nil, templateError(path, "every Fn::Join object requires two parameters")
	}
	delim, err := e.str(args[0], index(path, 0), "Fn::Join's delimiter")
	if err != nil {
		return nil, err
	}
	items, err := e.strings(args[1], index(path, 1), "Fn::Join's values")
	if err != nil {
		return nil, err
	}
	return strings.Join(items, delim), nil
}

func (e *evaluator) split(arg any, path string) (any, error) {
	args, ok := list(arg, 2)
	if !ok {
		return nil, templateError(path, "every Fn::Split object requires two parameters")
	}
	delim, err := e.str(args[0], index(path, 0), "Fn::Split's delimiter")
	if err != nil {
		return nil, err
	}
	s, err := e.str(args[1], index(path, 1), "Fn::Split's source")
	if err != nil {
		return nil, err
	}
	if delim == "" {
		return nil, templateError(index(path, 0), "Fn::Split's delimiter must not be empty")
	}
	var out []any
	for _, p := range strings.Split(s, delim) {
		out = append(out, p)
	}
	return out, nil
}

func (e *evaluator) ifThen(arg any, path string) (any, error) {
	args, ok := list(arg, 3)
	if !ok {
		return nil, templateError(path, "Fn::If requires a list argument with three elements")
	}
	b, err := e.condition(getAttResource(args), index(path, 0))
	if err != nil {
		return nil, err
	}
	if b {
		return e.eval(args[1], index(path, 1))
	}
	return e.eval(args[2], index(path, 2))
}

func (e *evaluator) base64(arg any, path string) (any, error) {
	s, err := e.str(arg, path, "Fn::Base64's value")
	if err != nil {
		return nil, err
	}
	return base64.StdEncoding.EncodeToString([]byte(s)), nil
}

func (e *evaluator) getAZs(arg any, path string) (any, error) {
	region, err := e.str(arg, path, "Fn::GetAZs's region")
	if err != nil {
		return nil, err
	}
	if region != "" && region != e.env.Region {
		return nil, templateError(path, "Fn::GetAZs can list the zones of the stack's region %s only, not %s", e.env.Region, region)
	}
	out := make([]any, len(e.env.Zones))
	for i, z := range e.env.Zones {
		out[i] = z
	}
	return out, nil
}

func (e *evaluator) importValue(arg any, path string) (any, error) {
	name, err := e.str(arg, path, "Fn::ImportValue's export name")
	if err != nil {
		return nil, err
	}
	if e.env.Import != nil {
		if v, ok := e.env.Import(name); ok {
			return v, nil
		}
	}
	return nil, &Error{Path: path, Message: "No export named " + name + " found"}
}

func (e *evaluator) ref(name, path string) (any, error) {
	env := e.env
	switch name {
	case "AWS::AccountId":
		return env.AccountID, nil
	case "AWS::Region":
		return env.Region, nil
	case "AWS::StackName":
		return env.StackName, nil
	case "AWS::StackId":
		return env.StackID, nil
	case "AWS::Partition":
		return cmpOr(env.Partition, "aws"), nil
	case "AWS::URLSuffix":
		return cmpOr(env.URLSuffix, "amazonaws.com"), nil
	case "AWS::NoValue":
		return noValue{}, nil
	case "AWS::NotificationARNs":
		return []any{}, nil
	}
	if p, ok := e.t.Parameters[name]; ok {
		v, ok := env.Parameters[name]
		if !ok {
			return nil, &Error{Path: path, Message: "Parameters: [" + name + "] must have values"}
		}
		if _, isList, _ := baseType(p.Type); isList {
			out := []any{}
			if v != "" {
				for _, it := range strings.Split(v, ",") {
					out = append(out, it)
				}
			}
			return out, nil
		}
		return v, nil
	}
	if _, ok := e.t.Resources[name]; ok && env.Resource != nil {
		if ref, _, made := env.Resource(name); made {
			return ref, nil
		}
	}
	return nil, formatError(path, "Unresolved resource dependencies [%s] in the Resources block of the template", name)
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// attribute returns a made resource's attribute.
func (e *evaluator) attribute(res, attr, path, fn string) (string, error) {
	if _, ok := e.t.Resources[res]; !ok || e.env.Resource == nil {
		return "", templateError(path, "instance of %s references undefined resource %s", fn, res)
	}
	_, attrs, made := e.env.Resource(res)
	if !made {
		return "", formatError(path, "Unresolved resource dependencies [%s] in the Resources block of the template", res)
	}
	v, ok := attrs[attr]
	if !ok {
		return "", templateError(path, "resource %s does not support attribute type %s in %s", res, attr, fn)
	}
	return v, nil
}

func (e *evaluator) getAtt(arg any, path string) (any, error) {
	args, ok := list(arg, 2)
	res := getAttResource(args)
	if !ok {
		return nil, templateError(path, "every Fn::GetAtt object requires two non-empty parameters")
	}
	attr, err := e.str(args[1], index(path, 1), "Fn::GetAtt's attribute name")
	if err != nil {
		return nil, err
	}
	return e.attribute(res, attr, path, "Fn::GetAtt")
}

func (e *evaluator) sub(arg any, path string) (any, error) {
	format, vars, ok := subArgs(arg)
	if !ok {
		return nil, templateError(path, "One or more Fn::Sub intrinsic functions don't specify expected arguments. Specify a string as first argument, and an optional second argument to specify a mapping of values to replace in the string")
	}
	var b strings.Builder
	for _, part := range parseSub(format) {
		if !part.isVar {
			b.WriteString(part.text)
			continue
		}
		name := part.text
		var v any
		var err error
		switch {
		case vars[name] != nil:
			v, err = e.eval(vars[name], join(path, name))
		case e.t.Parameters[name] != nil || slices.Contains(pseudoParameters, name):
			v, err = e.ref(name, path)
		default:
			if _, isRes := e.t.Resources[name]; isRes {
				v, err = e.ref(name, path)
				break
			}
			res, attr, dotted := strings.Cut(name, ".")
			if !dotted {
				return nil, formatError(path, "Unresolved resource dependencies [%s] in the Resources block of the template", name)
			}
			v, err = e.attribute(res, attr, path, "Fn::Sub")
		}
		if err != nil {
			return nil, err
		}
		s, ok := v.(string)
		if !ok {
			return nil, templateError(path, "variable %s in Fn::Sub must be a string, not a list; use Fn::Join to make one", name)
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

func (e *evaluator) sel(arg any, path string) (any, error) {
	args, ok := list(arg, 2)
	if !ok {
		return nil, templateError(path, "Fn::Select requires a list argument with two elements")
	}
	is, err := e.str(args[0], index(path, 0), "Fn::Select's index")
	if err != nil {
		return nil, err
	}
	i, err := atoi(is)
	if err != nil || i < 0 {
		return nil, templateError(index(path, 0), "Fn::Select's index must be a non-negative integer")
	}
	r, err := e.eval(args[1], index(path, 1))
	if err != nil {
		return nil, err
	}
	items, ok := r.([]any)
	if !ok {
		return nil, templateError(index(path, 1), "Fn::Select's second argument must be a list")
	}
	if i >= len(items) {
		return nil, templateError(path, "Fn::Select cannot select nonexistent value at index %d", i)
	}
	return items[i], nil
}

func (e *evaluator) findInMap(arg any, path string) (any, error) {
	args, ok := list(arg, 3)
	if !ok {
		return nil, templateError(path, "every Fn::FindInMap object requires three parameters")
	}
	keys := make([]string, 3)
	for i, a := range args {
		s, err := e.str(a, index(path, i), "Fn::FindInMap's keys")
		if err != nil {
			return nil, err
		}
		keys[i] = s
	}
	if v, ok := e.t.Mappings[keys[0]][keys[1]][keys[2]]; ok {
		return v, nil
	}
	return nil, templateError(path, "Unable to get mapping for %s::%s::%s", keys[0], keys[1], keys[2])
}

// condition returns a named condition's value.
func (e *evaluator) condition(name, path string) (bool, error) {
	if b, ok := e.env.Conditions[name]; ok {
		return b, nil
	}
	if b, ok := e.known[name]; ok {
		return b, nil
	}
	expr, ok := e.t.Conditions[name]
	if !ok {
		return false, formatError(path, "Unresolved condition dependencies [%s] in the template", name)
	}
	if e.evaluating[name] {
		return false, formatError(path, "Circular condition dependency on condition %s", name)
	}
	e.evaluating[name] = true
	defer delete(e.evaluating, name)
	b, err := e.boolean(expr, join("Conditions", name))
	if err == nil {
		e.known[name] = b
	}
	return b, err
}

// boolean evaluates a condition expression.
func (e *evaluator) boolean(v any, path string) (bool, error) {
	fn, arg, ok := intrinsic(v, true)
	if !ok {
		if s, isStr := v.(string); isStr && (s == "true" || s == "false") {
			return s == "true", nil
		}
		return false, templateError(path, "a condition must be a condition function (Fn::And, Fn::Equals, Fn::Not, Fn::Or or Condition)")
	}
	path = join(path, fn)
	switch fn {
	case "Condition":
		name, _ := arg.(string)
		return e.condition(name, path)
	case "Fn::Equals":
		args, ok := list(arg, 2)
		if !ok {
			return false, templateError(path, "Fn::Equals requires a list argument with two elements")
		}
		a, err := e.eval(args[0], index(path, 0))
		if err != nil {
			return false, err
		}
		b, err := e.eval(args[1], index(path, 1))
		if err != nil {
			return false, err
		}
		return equal(a, b), nil
	case "Fn::Not", "Fn::And", "Fn::Or":
		return e.logic(fn, arg, path)
	case "Fn::If", "Fn::FindInMap", "Ref", "Fn::Select":
		r, err := e.call(fn, arg, path)
		if err != nil {
			return false, err
		}
		return e.boolean(r, strings.TrimSuffix(path, "."+fn))
	}
	return false, templateError(path, "%s is not a condition function", fn)
}

// logic evaluates Fn::Not, Fn::And and Fn::Or.
func (e *evaluator) logic(fn string, arg any, path string) (bool, error) {
	args, ok := list(arg, -1)
	if !ok || len(args) == 0 {
		return false, templateError(path, "%s requires a list of conditions", fn)
	}
	acc := fn == "Fn::And"
	for i, a := range args {
		b, err := e.boolean(a, index(path, i))
		if err != nil {
			return false, err
		}
		switch fn {
		case "Fn::Not":
			return !b, nil
		case "Fn::And":
			acc = acc && b
		default:
			acc = acc || b
		}
	}
	return acc, nil
}

// equal compares two evaluated values.
func equal(a, b any) bool {
	switch a := a.(type) {
	case string:
		bs, ok := b.(string)
		return ok && a == bs
	case []any:
		bl, ok := b.([]any)
		return ok && slices.EqualFunc(a, bl, equal)
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok || len(a) != len(bm) {
			return false
		}
		for k, v := range a {
			if !equal(v, bm[k]) {
				return false
			}
		}
		return true
	case noValue:
		_, ok := b.(noValue)
		return ok
	}
	return false
}
