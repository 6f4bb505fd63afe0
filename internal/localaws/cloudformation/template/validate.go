package template

import (
	"maps"
	"regexp"
	"slices"
	"strings"
)

// pseudoParameters are the names Ref resolves without a template declaring them.
var pseudoParameters = []string{"AWS::AccountId", "AWS::NoValue", "AWS::NotificationARNs", "AWS::Partition", "AWS::Region", "AWS::StackId", "AWS::StackName", "AWS::URLSuffix"}

// functions are the intrinsic functions, in the order CloudFormation lists them when
// refusing another.
var functions = []string{"Fn::Base64", "Fn::GetAtt", "Fn::GetAZs", "Fn::ImportValue", "Fn::Join", "Fn::Split", "Fn::FindInMap", "Fn::Select", "Ref", "Fn::Equals", "Fn::If", "Fn::Not", "Condition", "Fn::And", "Fn::Or", "Fn::Sub", "Fn::Cidr"}

// conditionFunctions may stand where a condition is expected.
var conditionFunctions = []string{"Condition", "Fn::And", "Fn::Equals", "Fn::Not", "Fn::Or"}

// intrinsic returns the function name and argument when v is a function call: an
// object with a single key that is Ref, Condition (only where a condition may stand)
// or starts with Fn::.
func intrinsic(v any, inCondition bool) (string, any, bool) {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return "", nil, false
	}
	for k, arg := range m {
		if k == "Ref" || strings.HasPrefix(k, "Fn::") || k == "Condition" && inCondition {
			return k, arg, true
		}
	}
	return "", nil, false
}

// scope is where an expression stands: which names it may refer to and where the
// resources it refers to are recorded.
type scope struct {
	section     string // "Resources", "Outputs" or "Conditions"
	inCondition bool
	deps        map[string]bool // resources referred to (nil: none may be)
	// missing collects the names referred to that do not exist, so one error names
	// them all as CloudFormation's does (nil: the first is the error).
	missing *missing
}

// missing are the unknown names a section refers to, in the order found, and where
// the first is.
type missing struct {
	names []string
	path  string
}

func (m *missing) add(name, path string) {
	if len(m.names) == 0 {
		m.path = path
	}
	if !slices.Contains(m.names, name) {
		m.names = append(m.names, name)
	}
}

// err is the section's error, nil when nothing is missing.
func (m *missing) err(section string) error {
	if len(m.names) == 0 {
		return nil
	}
	return formatError(m.path, "Unresolved resource dependencies [%s] in the %s block of the template", strings.Join(m.names, ", "), section)
}

// Validate checks the template as CreateStack and ValidateTemplate do before anything
// is made: every intrinsic function's name and arguments, the targets of Ref, GetAtt,
// Sub and DependsOn, condition names, mapping names, resource types (supported nil
// accepts every type), parameter definitions and dependency cycles. Errors are *Error.
func (t *Template) Validate(supported func(typ string) bool) error {
	if t.Transform != nil {
		return formatError("Transform", "Transform is not supported here: macros such as AWS::Serverless are not run; deploy the processed template instead")
	}
	var unknown []string
	for _, id := range sortedKeys(t.Resources) {
		if typ := t.Resources[id].Type; supported != nil && !supported(typ) && !slices.Contains(unknown, typ) {
			unknown = append(unknown, typ)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return formatError("", "Unrecognized resource types: [%s]", strings.Join(unknown, ", "))
	}
	if err := t.validateParameters(); err != nil {
		return err
	}
	if err := t.validateConditions(); err != nil {
		return err
	}
	deps := map[string][]string{}
	unresolved := &missing{}
	for _, id := range sortedKeys(t.Resources) {
		d, err := t.validateResource(id, unresolved)
		if err != nil {
			return err
		}
		deps[id] = d
	}
	if err := unresolved.err("Resources"); err != nil {
		return err
	}
	if err := t.validateOutputs(); err != nil {
		return err
	}
	if cycle := cycles(deps); len(cycle) > 0 {
		return &Error{Message: "Circular dependency between resources: [" + strings.Join(cycle, ", ") + "]"}
	}
	t.deps = deps
	return nil
}

// validateResource checks one resource and returns its direct dependencies.
func (t *Template) validateResource(id string, unresolved *missing) ([]string, error) {
	r, path := t.Resources[id], join("Resources", id)
	if _, clash := t.Parameters[id]; clash {
		return nil, formatError(path, "Resource %s has the logical ID of a parameter; logical IDs must be unique", id)
	}
	if err := t.conditionExists(r.Condition, join(path, "Condition"), "Resources"); err != nil {
		return nil, err
	}
	sc := &scope{section: "Resources", deps: map[string]bool{}, missing: unresolved}
	for i, d := range r.DependsOn {
		if _, ok := t.Resources[d]; !ok {
			unresolved.add(d, index(join(path, "DependsOn"), i))
			continue
		}
		sc.deps[d] = true
	}
	for _, part := range []struct {
		key string
		v   map[string]any
	}{{"Properties", r.Properties}, {"CreationPolicy", r.CreationPolicy}, {"UpdatePolicy", r.UpdatePolicy}, {"Metadata", r.Metadata}} {
		if part.v != nil {
			if err := t.check(part.v, join(path, part.key), sc); err != nil {
				return nil, err
			}
		}
	}
	for _, p := range []struct{ key, v string }{{"DeletionPolicy", r.DeletionPolicy}, {"UpdateReplacePolicy", r.UpdateReplacePolicy}} {
		if p.v != "" && !slices.Contains([]string{"Delete", "Retain", "RetainExceptOnCreate", "Snapshot"}, p.v) {
			return nil, formatError(join(path, p.key), "Unrecognized %s %s for resource %s; it is one of Delete, Retain, RetainExceptOnCreate and Snapshot", p.key, p.v, id)
		}
	}
	return slices.Sorted(maps.Keys(sc.deps)), nil
}

func (t *Template) validateOutputs() error {
	unresolved := &missing{}
	for _, id := range sortedKeys(t.Outputs) {
		o, path := t.Outputs[id], join("Outputs", id)
		if err := t.conditionExists(o.Condition, join(path, "Condition"), "Outputs"); err != nil {
			return err
		}
		sc := &scope{section: "Outputs", deps: map[string]bool{}, missing: unresolved}
		if err := t.check(o.Value, join(path, "Value"), sc); err != nil {
			return err
		}
		if o.ExportName != nil {
			if err := t.check(o.ExportName, join(path, "Export.Name"), sc); err != nil {
				return err
			}
		}
	}
	return unresolved.err("Outputs")
}

func (t *Template) validateParameters() error {
	for _, name := range t.ParameterOrder {
		p, path := t.Parameters[name], join("Parameters", name)
		if p.AllowedPattern != "" {
			if _, err := regexp.Compile(p.AllowedPattern); err != nil {
				return formatError(join(path, "AllowedPattern"), "Parameter %s has an AllowedPattern that is not a valid regular expression", name)
			}
		}
		if p.MinLength != nil && p.MaxLength != nil && *p.MinLength > *p.MaxLength {
			return formatError(path, "Parameter %s has a MinLength greater than its MaxLength", name)
		}
		if p.MinValue != nil && p.MaxValue != nil && *p.MinValue > *p.MaxValue {
			return formatError(path, "Parameter %s has a MinValue greater than its MaxValue", name)
		}
	}
	return nil
}

func (t *Template) conditionExists(name, path, section string) error {
	if name == "" {
		return nil
	}
	if _, ok := t.Conditions[name]; !ok {
		return formatError(path, "Unresolved condition dependencies [%s] in the %s block of the template", name, section)
	}
	return nil
}

// validateConditions checks every condition expression and that conditions do not
// refer to each other in a circle.
func (t *Template) validateConditions() error {
	refs := map[string][]string{}
	for _, name := range sortedKeys(t.Conditions) {
		path := join("Conditions", name)
		fn, _, ok := intrinsic(t.Conditions[name], true)
		if !ok || !slices.Contains(conditionFunctions, fn) {
			return formatError(path, "Condition %s must be one of the condition functions Fn::And, Fn::Equals, Fn::Not, Fn::Or and Condition", name)
		}
		if err := t.check(t.Conditions[name], path, &scope{section: "Conditions", inCondition: true}); err != nil {
			return err
		}
		refs[name] = conditionRefs(t.Conditions[name], nil)
	}
	if cycle := cycles(refs); len(cycle) > 0 {
		return formatError("Conditions", "Circular condition dependency between conditions: [%s]", strings.Join(cycle, ", "))
	}
	return nil
}

// conditionRefs lists the conditions an expression names (Condition and Fn::If).
func conditionRefs(v any, acc []string) []string {
	switch v := v.(type) {
	case map[string]any:
		if c, ok := v["Condition"].(string); ok && len(v) == 1 {
			acc = append(acc, c)
		}
		if args, ok := v["Fn::If"].([]any); ok && len(v) == 1 && len(args) > 0 {
			if c, ok := args[0].(string); ok {
				acc = append(acc, c)
			}
		}
		for _, k := range sortedKeys(v) {
			acc = conditionRefs(v[k], acc)
		}
	case []any:
		for _, e := range v {
			acc = conditionRefs(e, acc)
		}
	}
	return acc
}

// check walks an expression, checking each function call.
func (t *Template) check(v any, path string, sc *scope) error {
	if fn, arg, ok := intrinsic(v, sc.inCondition); ok {
		return t.checkFunction(fn, arg, join(path, fn), sc)
	}
	switch v := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(v) {
			if err := t.check(v[k], join(path, k), sc); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range v {
			if err := t.check(e, index(path, i), sc); err != nil {
				return err
			}
		}
	}
	return nil
}

// refTarget checks a name Ref or Sub refers to and records a resource dependency.
func (t *Template) refTarget(name, path string, sc *scope) error {
	if _, ok := t.Parameters[name]; ok || slices.Contains(pseudoParameters, name) {
		return nil
	}
	if _, ok := t.Resources[name]; ok {
		if sc.section == "Conditions" {
			return formatError(path, "Unresolved dependencies [%s]. Cannot reference resources in the Conditions block of the template", name)
		}
		if sc.deps != nil {
			sc.deps[name] = true
		}
		return nil
	}
	if sc.missing != nil {
		sc.missing.add(name, path)
		return nil
	}
	return formatError(path, "Unresolved resource dependencies [%s] in the %s block of the template", name, sc.section)
}

// getAttTarget checks the resource GetAtt (or a Sub's ${R.A}) names.
func (t *Template) getAttTarget(fn, name, path string, sc *scope) error {
	if _, ok := t.Resources[name]; !ok {
		return templateError(path, "instance of %s references undefined resource %s", fn, name)
	}
	if sc.section == "Conditions" {
		return formatError(path, "Unresolved dependencies [%s]. Cannot reference resources in the Conditions block of the template", name)
	}
	if sc.deps != nil {
		sc.deps[name] = true
	}
	return nil
}

// list returns arg as a list of n items (n < 0: any length) or ok false.
func list(arg any, n int) ([]any, bool) {
	l, ok := arg.([]any)
	return l, ok && (n < 0 || len(l) == n)
}

// isCall reports whether v is a function call (which may stand for a list or string).
func isCall(v any) bool {
	_, _, ok := intrinsic(v, true)
	return ok
}

// checkArgs checks each argument of a call.
func (t *Template) checkArgs(args []any, path string, sc *scope) error {
	for i, a := range args {
		if err := t.check(a, index(path, i), sc); err != nil {
			return err
		}
	}
	return nil
}

// checker checks one function's argument.
type checker func(t *Template, arg any, path string, sc *scope) error

// checkers are the functions' checkers (set in init: they call check, which uses
// them).
var checkers map[string]checker

func init() {
	boolean := func(fn string) checker {
		return func(t *Template, arg any, path string, sc *scope) error { return t.checkBoolean(fn, arg, path, sc) }
	}
	oneValue := func(fn string) checker {
		return func(t *Template, arg any, path string, sc *scope) error {
			if !isString(arg) && !isCall(arg) {
				return templateError(path, "%s requires a single string value or a function that returns one", fn)
			}
			return t.check(arg, path, sc)
		}
	}
	checkers = map[string]checker{
		"Ref": (*Template).checkRef, "Fn::GetAtt": (*Template).checkGetAtt, "Fn::Sub": (*Template).checkSub,
		"Fn::Join": (*Template).checkJoin, "Fn::Split": (*Template).checkSplit, "Fn::Select": (*Template).checkSelect,
		"Fn::If": (*Template).checkIf, "Fn::Equals": (*Template).checkEquals, "Condition": (*Template).checkCondition,
		"Fn::FindInMap": (*Template).checkFindInMap, "Fn::Cidr": (*Template).checkCidr,
		"Fn::Not": boolean("Fn::Not"), "Fn::And": boolean("Fn::And"), "Fn::Or": boolean("Fn::Or"),
		"Fn::Base64": oneValue("Fn::Base64"), "Fn::GetAZs": oneValue("Fn::GetAZs"), "Fn::ImportValue": oneValue("Fn::ImportValue"),
	}
}

func (t *Template) checkFunction(fn string, arg any, path string, sc *scope) error {
	if c, ok := checkers[fn]; ok {
		return c(t, arg, path, sc)
	}
	return templateError(path, "Encountered unsupported function: %s Supported functions are: [%s]", fn, strings.Join(functions, ", "))
}

func (t *Template) checkRef(arg any, path string, sc *scope) error {
	name, ok := arg.(string)
	if !ok || name == "" {
		return formatError(path, "Every Ref object must have a single String value.")
	}
	return t.refTarget(name, path, sc)
}

func (t *Template) checkGetAtt(arg any, path string, sc *scope) error {
	args, ok := list(arg, 2)
	res := getAttResource(args)
	if !ok || res == "" || args[1] == "" || !isString(args[1]) && !isCall(args[1]) {
		return templateError(path, "every Fn::GetAtt object requires two non-empty parameters, the resource name and the attribute name")
	}
	if err := t.check(args[1], index(path, 1), sc); err != nil {
		return err
	}
	return t.getAttTarget("Fn::GetAtt", res, path, sc)
}

func (t *Template) checkJoin(arg any, path string, sc *scope) error {
	args, ok := list(arg, 2)
	if !ok || !isString(args[0]) || !isList(args[1]) && !isCall(args[1]) {
		return templateError(path, "every Fn::Join object requires two parameters, (1) a string delimiter and (2) a list of strings to be joined or a function that returns a list of strings (such as Fn::GetAZs) to be joined.")
	}
	return t.checkArgs(args, path, sc)
}

func (t *Template) checkSplit(arg any, path string, sc *scope) error {
	args, ok := list(arg, 2)
	if !ok || !isString(args[0]) || args[0] == "" || !isString(args[1]) && !isCall(args[1]) {
		return templateError(path, "every Fn::Split object requires two parameters, (1) a non-empty string delimiter and (2) a string to be split or a function that returns a string to be split.")
	}
	return t.checkArgs(args, path, sc)
}

func (t *Template) checkSelect(arg any, path string, sc *scope) error {
	args, ok := list(arg, 2)
	if ok {
		if s, literal := args[0].(string); literal {
			n, err := atoi(s)
			ok = err == nil && n >= 0
		} else {
			ok = isCall(args[0])
		}
	}
	if !ok || !isList(args[1]) && !isCall(args[1]) {
		return templateError(path, "Fn::Select requires a list argument with two elements: a non-negative integer index and a list of values or a function that returns one")
	}
	return t.checkArgs(args, path, sc)
}

func (t *Template) checkIf(arg any, path string, sc *scope) error {
	args, ok := list(arg, 3)
	if !ok {
		return templateError(path, "Fn::If requires a list argument with three elements: a condition name, the value when it is true and the value when it is false")
	}
	if !isString(args[0]) {
		return templateError(index(path, 0), "Fn::If requires a list argument with the first element being a condition")
	}
	if _, ok := t.Conditions[args[0].(string)]; !ok {
		return templateError(index(path, 0), "unresolved condition dependency %s in Fn::If", args[0])
	}
	return t.checkArgs(args[1:], path, sc)
}

func (t *Template) checkEquals(arg any, path string, sc *scope) error {
	args, ok := list(arg, 2)
	if !ok {
		return templateError(path, "Fn::Equals requires a list argument with two elements, the values to compare")
	}
	return t.checkArgs(args, path, &scope{section: sc.section, deps: sc.deps, missing: sc.missing})
}

func (t *Template) checkCondition(arg any, path string, sc *scope) error {
	name, ok := arg.(string)
	if !ok {
		return templateError(path, "Condition requires a single string value, the condition's name")
	}
	if _, ok := t.Conditions[name]; !ok {
		return formatError(path, "Unresolved condition dependencies [%s] in the %s block of the template", name, sc.section)
	}
	return nil
}

func (t *Template) checkFindInMap(arg any, path string, sc *scope) error {
	const msg = "every Fn::FindInMap object requires three parameters, the map name, map key and the attribute for return value"
	args, ok := list(arg, 3)
	if !ok {
		return templateError(path, msg)
	}
	for i, a := range args {
		if !isString(a) && !isCall(a) {
			return templateError(index(path, i), msg)
		}
	}
	if name, ok := args[0].(string); ok {
		if _, ok := t.Mappings[name]; !ok {
			return templateError(index(path, 0), "Mapping named '%s' is not present in the 'Mappings' section of template.", name)
		}
	}
	return t.checkArgs(args, path, sc)
}

func (t *Template) checkCidr(arg any, path string, sc *scope) error {
	args, ok := list(arg, 3)
	if !ok {
		return templateError(path, "Fn::Cidr requires a list argument with three elements: an IP block, the count of subnets and the subnet mask's host bits")
	}
	return t.checkArgs(args, path, sc)
}

// checkBoolean checks Fn::Not (one condition) and Fn::And/Fn::Or (2 to 10).
func (t *Template) checkBoolean(fn string, arg any, path string, sc *scope) error {
	args, ok := list(arg, -1)
	if fn == "Fn::Not" && (!ok || len(args) != 1) {
		return templateError(path, "Fn::Not requires a list argument with one condition")
	}
	if fn != "Fn::Not" && (!ok || len(args) < 2 || len(args) > 10) {
		return templateError(path, "every %s object requires a list of at least 2 and at most 10 conditions", fn)
	}
	inner := &scope{section: sc.section, inCondition: true, deps: sc.deps, missing: sc.missing}
	for i, a := range args {
		name, _, ok := intrinsic(a, true)
		if !ok || !slices.Contains(conditionFunctions, name) {
			return templateError(index(path, i), "%s takes conditions: Fn::And, Fn::Equals, Fn::Not, Fn::Or or Condition functions", fn)
		}
		if err := t.check(a, index(path, i), inner); err != nil {
			return err
		}
	}
	return nil
}

// getAttResource returns the resource of a GetAtt's arguments ("" if none).
func getAttResource(args []any) string {
	if len(args) == 0 {
		return ""
	}
	s, _ := args[0].(string)
	return s
}

func isString(v any) bool {
	_, ok := v.(string)
	return ok
}

func isList(v any) bool {
	_, ok := v.([]any)
	return ok
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
