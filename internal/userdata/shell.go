package userdata

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// BootstrapCall is a call of the AL2 /etc/eks/bootstrap.sh found in a shell script,
// with its arguments expanded as the shell would expand them.
type BootstrapCall struct {
	// Line is the line of the call in the script.
	Line int
	// Args are the arguments after bootstrap.sh, after quote removal and variable
	// expansion.
	Args []string
}

// maxVarLen bounds a variable's value: a script that keeps doubling a variable must
// not exhaust memory. A longer value counts as unknown.
const maxVarLen = 64 << 10

// staticEnv holds the variables a script assigns before the call, as far as they can
// be known without running anything.
type staticEnv struct {
	vars    map[string]expand.Variable
	dynamic map[string]int // variables set by something nodeadm does not run → line
	// cloudFormation is set when the script holds ${AWS::...} placeholders.
	cloudFormation bool
}

func (e *staticEnv) Get(name string) expand.Variable { return e.vars[name] }

func (e *staticEnv) Each(fn func(string, expand.Variable) bool) {
	for k, v := range e.vars {
		if !fn(k, v) {
			return
		}
	}
}

// scriptCalls is what nodeadm reads in a shell script: its bootstrap.sh call (nil for
// none), its cfn-signal calls and the findings about them.
type scriptCalls struct {
	bootstrap *BootstrapCall
	signals   []*Signal
	findings  []Finding
}

// findBootstrapCall parses a shell script and returns its bootstrap.sh call, or nil
// when it has none. Variables assigned earlier in the script (VAR=value, export
// VAR=value) are expanded in the call's arguments; a variable the script does not set,
// or sets from a command's output, is an error that names it.
func findBootstrapCall(script []byte, where string) (*BootstrapCall, error) {
	calls, err := scanScript(script, where, false)
	if err != nil {
		return nil, err
	}
	return calls.bootstrap, nil
}

// scanScript parses a shell script and finds its bootstrap.sh and cfn-signal calls;
// signalsOnly skips bootstrap.sh calls, so that their faults do not hide the signal.
func scanScript(script []byte, where string, signalsOnly bool) (*scriptCalls, error) {
	script = bytes.ReplaceAll(script, []byte("\r\n"), []byte("\n"))
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(bytes.NewReader(script), where)
	if err != nil {
		return nil, fmt.Errorf("%s: shell syntax error: %w", where, err)
	}
	env := &staticEnv{vars: map[string]expand.Variable{}, dynamic: map[string]int{}, cloudFormation: bytes.Contains(script, []byte("${AWS::"))}
	s := &scriptWalker{where: where, env: env, cfg: &expand.Config{Env: env, NoUnset: true, ProcSubst: refuseProcSubst}, signalsOnly: signalsOnly}
	syntax.Walk(f, s.visit)
	if s.err != nil {
		return nil, s.err
	}
	calls := &scriptCalls{signals: s.signals, findings: s.findings}
	switch len(s.calls) {
	case 0:
		return calls, nil
	case 1:
		calls.bootstrap = s.calls[0]
		return calls, nil
	default:
		return nil, fmt.Errorf("%s: bootstrap.sh is called %d times (lines %d and %d); a node bootstraps once", where, len(s.calls), s.calls[0].Line, s.calls[1].Line)
	}
}

// scriptWalker follows a script's assignments in order and collects its bootstrap.sh calls.
type scriptWalker struct {
	where string
	env   *staticEnv
	cfg   *expand.Config
	calls []*BootstrapCall
	err   error
	// signals and findings are the script's cfn-signal calls and what is wrong with them.
	signals     []*Signal
	findings    []Finding
	signalsOnly bool
}

func (s *scriptWalker) assign(a *syntax.Assign) {
	if a.Name == nil {
		return
	}
	if a.Value == nil {
		s.env.vars[a.Name.Value] = expand.Variable{Set: true, Kind: expand.String}
		return
	}
	v, err := expand.Literal(s.cfg, a.Value)
	if err != nil || len(v) > maxVarLen {
		delete(s.env.vars, a.Name.Value)
		s.env.dynamic[a.Name.Value] = int(a.Pos().Line())
		return
	}
	delete(s.env.dynamic, a.Name.Value)
	s.env.vars[a.Name.Value] = expand.Variable{Set: true, Kind: expand.String, Str: v}
}

func (s *scriptWalker) visit(node syntax.Node) bool {
	if s.err != nil {
		return false
	}
	switch n := node.(type) {
	case *syntax.DeclClause:
		for _, a := range n.Args {
			s.assign(a)
		}
	case *syntax.CallExpr:
		if len(n.Args) == 0 {
			for _, a := range n.Assigns {
				s.assign(a)
			}
			return true
		}
		s.call(n)
	}
	return s.err == nil
}

// call records n when it runs bootstrap.sh.
func (s *scriptWalker) call(n *syntax.CallExpr) {
	args := n.Args
	for len(args) > 1 && isWrapper(args[0]) {
		args = args[1:]
	}
	name, err := expand.Literal(s.cfg, args[0])
	if err == nil && isCFNSignal(name) {
		s.signal(n, args[1:])
		return
	}
	if err != nil || path.Base(name) != "bootstrap.sh" || s.signalsOnly {
		return
	}
	line := int(n.Pos().Line())
	for _, w := range args[1:] {
		if hasBraceExpansion(w) {
			s.err = fmt.Errorf("%s, line %d: bootstrap.sh argument %q uses brace expansion, which nodeadm does not expand; write the values out", s.where, line, clip(wordText(w)))
			return
		}
	}
	fields, err := expand.Fields(s.cfg, args[1:]...)
	if err != nil {
		s.err = expansionError(s.where, line, s.env, err)
		return
	}
	s.calls = append(s.calls, &BootstrapCall{Line: line, Args: fields})
}

// hasBraceExpansion reports an unquoted {a,b} or {1..9} in a word: its expansion can
// grow exponentially, so hostile user data could exhaust memory.
// refuseProcSubst answers a process substitution, <(cmd) or >(cmd), in a word nodeadm
// expands: its value is a path that only running the script would create.
func refuseProcSubst(*syntax.ProcSubst) (string, error) {
	return "", errors.New("a process substitution <(…) or >(…) has a value only running the script would give; write the value out")
}

func hasBraceExpansion(w *syntax.Word) bool {
	for _, part := range w.Parts {
		if lit, ok := part.(*syntax.Lit); ok && strings.Contains(lit.Value, "{") && strings.Contains(lit.Value, "}") {
			return true
		}
	}
	return false
}

func wordText(w *syntax.Word) string {
	var b strings.Builder
	_ = syntax.NewPrinter().Print(&b, w)
	return b.String()
}

// isWrapper is true for words that run the next word as the command.
func isWrapper(w *syntax.Word) bool {
	lit := w.Lit()
	return lit == "sudo" || lit == "exec" || lit == "bash" || lit == "sh" || lit == "command" || lit == "env"
}

func expansionError(where string, line int, env *staticEnv, err error) error {
	var unset expand.UnsetParameterError
	if errors.As(err, &unset) {
		name := unset.Node.Param.Value
		if l, ok := env.dynamic[name]; ok {
			return fmt.Errorf("%s, line %d: bootstrap.sh argument $%s comes from line %d, whose value nodeadm cannot know without running the script (a command's output, or over 64 KiB); give its value literally", where, line, name, l)
		}
		hint := "set it before the call or give the value literally"
		if env.cloudFormation {
			hint = "the script still holds CloudFormation Fn::Sub placeholders such as ${AWS::Region}, which CloudFormation replaces before an instance sees its user data: test the rendered user data (aws ec2 describe-instance-attribute --attribute userData)"
		}
		return fmt.Errorf("%s, line %d: bootstrap.sh argument $%s is not set earlier in the script; %s", where, line, name, hint)
	}
	return fmt.Errorf("%s, line %d: expanding bootstrap.sh arguments: %s", where, line, strings.TrimSpace(err.Error()))
}
