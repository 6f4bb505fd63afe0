package template

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// awsTypes are the AWS-specific parameter types and the shape of their values. Their
// values are checked loosely, by shape: this package cannot ask EC2 whether a VPC
// exists, and the resource that uses the value fails when it does not.
var awsTypes = map[string]*regexp.Regexp{
	"AWS::EC2::AvailabilityZone::Name":   regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-\d[a-z]$`),
	"AWS::EC2::Image::Id":                regexp.MustCompile(`^ami-[0-9a-zA-Z]+$`),
	"AWS::EC2::Instance::Id":             regexp.MustCompile(`^i-[0-9a-zA-Z]+$`),
	"AWS::EC2::KeyPair::KeyName":         regexp.MustCompile(`^.{1,255}$`),
	"AWS::EC2::SecurityGroup::GroupName": regexp.MustCompile(`^.{1,255}$`),
	"AWS::EC2::SecurityGroup::Id":        regexp.MustCompile(`^sg-[0-9a-zA-Z]+$`),
	"AWS::EC2::Subnet::Id":               regexp.MustCompile(`^subnet-[0-9a-zA-Z]+$`),
	"AWS::EC2::Volume::Id":               regexp.MustCompile(`^vol-[0-9a-zA-Z]+$`),
	"AWS::EC2::VPC::Id":                  regexp.MustCompile(`^vpc-[0-9a-zA-Z]+$`),
	"AWS::Route53::HostedZone::Id":       regexp.MustCompile(`^[0-9A-Z]{1,32}$`),
	"AWS::SSM::Parameter::Name":          regexp.MustCompile(`^.+$`),
}

// baseType splits a parameter type into its element type and whether it is a list:
// List<T> and CommaDelimitedList are lists; AWS::SSM::Parameter::Value<T> is T read
// from Parameter Store (ssm true).
func baseType(typ string) (elem string, isList, ssm bool) {
	if inner, ok := strings.CutPrefix(typ, "AWS::SSM::Parameter::Value<"); ok && strings.HasSuffix(inner, ">") {
		elem, isList, _ = baseType(strings.TrimSuffix(inner, ">"))
		return elem, isList, true
	}
	if inner, ok := strings.CutPrefix(typ, "List<"); ok && strings.HasSuffix(inner, ">") {
		return strings.TrimSuffix(inner, ">"), true, false
	}
	if typ == "CommaDelimitedList" {
		return "String", true, false
	}
	return typ, false, false
}

func knownParameterType(typ string) bool {
	elem, isList, ssm := baseType(typ)
	if strings.Contains(elem, "<") || elem == "AWS::SSM::Parameter::Name" && (isList || ssm) {
		return false
	}
	switch elem {
	case "String":
		return true
	case "Number":
		return !ssm
	}
	_, ok := awsTypes[elem]
	return ok
}

// paramError is a parameter value's error, never quoting a NoEcho value.
func paramError(format string, args ...any) *Error {
	return &Error{Message: sprintf(format, args...)}
}

// BindParameters returns every parameter's value: given, else its default. It refuses
// unknown keys and parameters with neither ("Parameters: [A, B] must have values"),
// checks each value against its type and constraints, and resolves
// AWS::SSM::Parameter::Value<...> parameters with ssm (the resolved value is what Ref
// sees). List values are comma-joined. Errors are *Error; none quotes a NoEcho value.
func (t *Template) BindParameters(given map[string]string, ssm func(name string) (string, error)) (map[string]string, error) {
	var unknown, missing []string
	for _, k := range sortedKeys(given) {
		if _, ok := t.Parameters[k]; !ok {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		return nil, paramError("Parameters: [%s] do not exist in the template", strings.Join(unknown, ", "))
	}
	out := map[string]string{}
	for _, name := range t.ParameterOrder {
		p := t.Parameters[name]
		v, ok := given[name]
		if !ok && p.Default != nil {
			v, ok = *p.Default, true
		}
		if !ok {
			missing = append(missing, name)
			continue
		}
		out[name] = v
	}
	if len(missing) > 0 {
		return nil, paramError("Parameters: [%s] must have values", strings.Join(missing, ", "))
	}
	for _, name := range t.ParameterOrder {
		v, err := t.bindOne(name, out[name], ssm)
		if err != nil {
			return nil, err
		}
		out[name] = v
	}
	return out, nil
}

func (t *Template) bindOne(name, value string, ssm func(string) (string, error)) (string, error) {
	p := t.Parameters[name]
	elem, isList, fromSSM := baseType(p.Type)
	if err := p.constrain(name, value, isList); err != nil {
		return "", err
	}
	if fromSSM {
		if ssm == nil {
			return "", paramError("Unable to fetch parameters [%s] from parameter store for this account.", value)
		}
		resolved, err := ssm(value)
		if err != nil {
			return "", paramError("Unable to fetch parameters [%s] from parameter store for this account.", value)
		}
		value = resolved
	}
	items := []string{value}
	if isList {
		// Each item is space-trimmed, as CloudFormation documents for
		// CommaDelimitedList and does for every list type.
		items = strings.Split(value, ",")
		for i := range items {
			items[i] = strings.TrimSpace(items[i])
		}
		if value == "" {
			items = nil
		}
	}
	for _, it := range items {
		if err := checkElem(name, elem, it, p.NoEcho || fromSSM); err != nil {
			return "", err
		}
	}
	if isList {
		return strings.Join(items, ","), nil
	}
	return value, nil
}

// constrain checks the template's own constraints on a value (each item of a list
// for AllowedValues).
func (p *Parameter) constrain(name, value string, isList bool) error {
	if len(p.AllowedValues) > 0 {
		items := []string{value}
		if isList {
			items = strings.Split(value, ",")
		}
		for _, it := range items {
			if !slices.Contains(p.AllowedValues, it) && !slices.Contains(p.AllowedValues, strings.TrimSpace(it)) {
				return paramError("Parameter '%s' must be one of AllowedValues", name)
			}
		}
	}
	if err := p.constrainString(name, value); err != nil {
		return err
	}
	return p.constrainNumber(name, value)
}

// fail is a constraint's error: the template's ConstraintDescription when it has one.
func (p *Parameter) fail(name, format string, args ...any) error {
	if p.ConstraintDescription != "" {
		return paramError("Parameter '%s' failed to satisfy constraint: %s", name, p.ConstraintDescription)
	}
	return paramError(format, args...)
}

func (p *Parameter) constrainString(name, value string) error {
	n := len([]rune(value))
	if p.MinLength != nil && n < *p.MinLength {
		return p.fail(name, "Parameter '%s' must contain at least %d characters", name, *p.MinLength)
	}
	if p.MaxLength != nil && n > *p.MaxLength {
		return p.fail(name, "Parameter '%s' must contain at most %d characters", name, *p.MaxLength)
	}
	if p.AllowedPattern != "" {
		re, err := regexp.Compile(`^(?:` + p.AllowedPattern + `)$`)
		if err != nil || !re.MatchString(value) {
			return p.fail(name, "Parameter '%s' must match pattern %s", name, p.AllowedPattern)
		}
	}
	return nil
}

func (p *Parameter) constrainNumber(name, value string) error {
	if p.MinValue == nil && p.MaxValue == nil {
		return nil
	}
	f, err := parseNumber(value)
	if err != nil {
		return paramError("Parameter '%s' must be a number", name)
	}
	if p.MinValue != nil && f < *p.MinValue {
		return p.fail(name, "Parameter '%s' must be a number not less than %s", name, strconv.FormatFloat(*p.MinValue, 'f', -1, 64))
	}
	if p.MaxValue != nil && f > *p.MaxValue {
		return p.fail(name, "Parameter '%s' must be a number not greater than %s", name, strconv.FormatFloat(*p.MaxValue, 'f', -1, 64))
	}
	return nil
}

// checkElem checks one value against its (element) type; secret values (NoEcho, or
// read from Parameter Store) are not quoted.
func checkElem(name, elem, value string, secret bool) error {
	switch elem {
	case "String":
		return nil
	case "Number":
		if _, err := parseNumber(value); err != nil {
			return paramError("Parameter '%s' must be a number", name)
		}
		return nil
	}
	if re := awsTypes[elem]; re != nil && !re.MatchString(value) {
		shown := value
		if secret {
			shown = "****"
		}
		return paramError("Parameter validation failed: parameter value %s for parameter name %s does not exist; a value of type %s is expected", shown, name, elem)
	}
	return nil
}
