package template

import (
	"regexp"
	"slices"
	"strings"
)

// subVarName is what a Fn::Sub variable may be called.
var subVarName = regexp.MustCompile(`^[A-Za-z0-9_.:]+$`)

func (t *Template) checkSub(arg any, path string, sc *scope) error {
	format, vars, ok := subArgs(arg)
	if !ok {
		return templateError(path, "One or more Fn::Sub intrinsic functions don't specify expected arguments. Specify a string as first argument, and an optional second argument to specify a mapping of values to replace in the string")
	}
	for _, k := range sortedKeys(vars) {
		if err := t.check(vars[k], join(path, k), sc); err != nil {
			return err
		}
	}
	for _, part := range parseSub(format) {
		if !part.isVar {
			continue
		}
		name := part.text
		if !subVarName.MatchString(name) {
			return templateError(path, "variable names in Fn::Sub syntax must contain only alphanumeric characters, underscores, periods, and colons")
		}
		if _, ok := vars[name]; ok {
			continue
		}
		if _, ok := t.Parameters[name]; ok || slices.Contains(pseudoParameters, name) {
			continue
		}
		if res, attr, dotted := strings.Cut(name, "."); dotted && attr != "" {
			if err := t.getAttTarget("Fn::Sub", res, path, sc); err != nil {
				return err
			}
			continue
		}
		if err := t.refTarget(name, path, sc); err != nil {
			return err
		}
	}
	return nil
}

// subArgs splits Fn::Sub's argument: a format string, or [format, variables].
func subArgs(arg any) (string, map[string]any, bool) {
	if s, ok := arg.(string); ok {
		return s, nil, true
	}
	args, ok := list(arg, 2)
	if !ok {
		return "", nil, false
	}
	format, ok1 := args[0].(string)
	vars, ok2 := args[1].(map[string]any)
	return format, vars, ok1 && ok2
}

// subPart is a literal run or a ${variable} of a Fn::Sub format.
type subPart struct {
	text  string
	isVar bool
}

// parseSub splits a Fn::Sub format: "${Name}" is a variable, "${!Text}" the literal
// "${Text}", and a "${" without a closing brace is literal text.
func parseSub(format string) []subPart {
	var parts []subPart
	var lit strings.Builder
	for {
		i := strings.Index(format, "${")
		if i < 0 {
			lit.WriteString(format)
			break
		}
		end := strings.IndexByte(format[i:], '}')
		if end < 0 {
			lit.WriteString(format)
			break
		}
		lit.WriteString(format[:i])
		inner := format[i+2 : i+end]
		if strings.HasPrefix(inner, "!") {
			lit.WriteString("${" + inner[1:] + "}")
		} else {
			if lit.Len() > 0 {
				parts = append(parts, subPart{text: lit.String()})
				lit.Reset()
			}
			parts = append(parts, subPart{text: strings.TrimSpace(inner), isVar: true})
		}
		format = format[i+end+1:]
	}
	if lit.Len() > 0 {
		parts = append(parts, subPart{text: lit.String()})
	}
	return parts
}
