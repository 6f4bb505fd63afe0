package userdata

import (
	"fmt"
	"path"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// Signal is a cfn-signal call found in a shell script: the node asks to tell
// CloudFormation that it is up. nodeadm sends the signal itself once the node is Ready
// (internal/nodeadm/cfnsignal), with SUCCESS or FAILURE decided by the join, so the
// call's exit code and --success are recorded only.
type Signal struct {
	// Part is the user-data part the call is in; Line its line there.
	Part string `json:"part"`
	Line int    `json:"line"`
	// Stack and Resource name what is signalled: the stack's name or ID and the
	// logical ID of the resource with the CreationPolicy (such as NodeGroup).
	Stack    string `json:"stack"`
	Resource string `json:"resource"`
	// Region is --region; empty means the instance's region.
	Region string `json:"region,omitempty"`
	// UniqueID is -i/--id; empty means the instance ID, as cfn-signal does.
	UniqueID string `json:"uniqueId,omitempty"`
	// URL is --url, CloudFormation's endpoint; empty means the SDK's (AWS_ENDPOINT_URL…).
	URL string `json:"url,omitempty"`
	// Role, HTTPSProxy, Reason and Data are the other options, kept as written.
	Role       string `json:"role,omitempty"`
	HTTPSProxy string `json:"httpsProxy,omitempty"`
	Reason     string `json:"reason,omitempty"`
	Data       string `json:"data,omitempty"`
	// ExitCode is -e/--exit-code as written (often "$?"). It is ignored on purpose:
	// in AWS's templates it is the status of whatever line ran before (always 0 in a
	// script part of its own), not of the join; nodeadm signals the join's outcome.
	ExitCode string `json:"exitCode,omitempty"`
	// Success is -s/--success as written; ignored for the same reason.
	Success string `json:"success,omitempty"`
}

// signalOption is one cfn-signal option: its long name and the field it sets.
type signalOption struct {
	long, short string
	set         func(*Signal) *string
}

// signalOptions are cfn-signal's options (cfn-bootstrap's cfn-signal --help).
var signalOptions = []signalOption{
	{"exit-code", "e", func(s *Signal) *string { return &s.ExitCode }},
	{"success", "s", func(s *Signal) *string { return &s.Success }},
	{"reason", "r", func(s *Signal) *string { return &s.Reason }},
	{"data", "d", func(s *Signal) *string { return &s.Data }},
	{"id", "i", func(s *Signal) *string { return &s.UniqueID }},
	{"stack", "", func(s *Signal) *string { return &s.Stack }},
	{"resource", "", func(s *Signal) *string { return &s.Resource }},
	{"region", "", func(s *Signal) *string { return &s.Region }},
	{"role", "", func(s *Signal) *string { return &s.Role }},
	{"url", "", func(s *Signal) *string { return &s.URL }},
	{"https-proxy", "", func(s *Signal) *string { return &s.HTTPSProxy }},
}

// credentialOptions are cfn-signal options that carry credentials: nodeadm uses the
// instance role, and never repeats their values.
var credentialOptions = map[string]bool{"access-key": true, "secret-key": true, "credential-file": true, "f": true}

func isCFNSignal(name string) bool { return path.Base(name) == "cfn-signal" }

// signal records n, a cfn-signal call, as a Signal or as a finding saying why nodeadm
// will not send it. Problems with the line are findings, not errors: the node still
// joins, and the stack waits for a signal that does not come, as it would on EC2.
func (s *scriptWalker) signal(n *syntax.CallExpr, args []*syntax.Word) {
	line := int(n.Pos().Line())
	warn := func(format string, a ...any) {
		s.findings = append(s.findings, Finding{Part: s.where, Level: LevelWarning,
			Msg: fmt.Sprintf("line %d: cfn-signal: ", line) + fmt.Sprintf(format, a...) + "; nodeadm sends no signal"})
	}
	values := make([]string, 0, len(args))
	for _, w := range args {
		text := wordText(w)
		switch {
		case strings.Contains(text, "${AWS::"):
			warn("%q is a CloudFormation placeholder that Fn::Sub did not replace (use !Sub for the user data, or test the rendered user data)", clip(text))
			return
		case strings.Contains(text, "$?"):
			values = append(values, "$?")
			continue
		case hasBraceExpansion(w):
			warn("%q uses brace expansion, which nodeadm does not expand; write the value out", clip(text))
			return
		}
		v, err := expand.Fields(s.cfg, w)
		if err != nil {
			warn("%s", strings.TrimPrefix(expansionError(s.where, line, s.env, err).Error(), fmt.Sprintf("%s, line %d: ", s.where, line)))
			return
		}
		values = append(values, v...)
	}
	sig, err := parseSignalArgs(values)
	if err == nil {
		err = sig.check()
	}
	if err != nil {
		warn("%s", err)
		return
	}
	sig.Part, sig.Line = s.where, line
	s.signals = append(s.signals, sig)
}

// parseSignalArgs reads cfn-signal's options: --name value, --name=value, -x value
// and -xvalue.
func parseSignalArgs(args []string) (*Signal, error) {
	sig := &Signal{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || !strings.HasPrefix(a, "-") || a == "-" {
			return nil, fmt.Errorf("%q: the WaitConditionHandle URL form is not supported (nodeadm signals a resource: give --stack and --resource)", clip(a))
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		long := strings.HasPrefix(a, "--")
		if !long && len(name) > 1 {
			name, value, hasValue = name[:1], a[2:], true
		}
		if credentialOptions[name] {
			flag := "--" + name
			if !long {
				flag = "-" + name
			}
			return nil, fmt.Errorf("option %s carries credentials, which nodeadm does not use (it signs with the instance role); remove it", flag)
		}
		opt := findSignalOption(name, long)
		if opt == nil {
			return nil, fmt.Errorf("unknown option %q (cfn-signal takes -e, -s, -r, -d, -i, --stack, --resource, --region, --role, --url, --https-proxy)", clip(a))
		}
		if !hasValue {
			if i+1 >= len(args) {
				return nil, fmt.Errorf("option --%s needs a value", opt.long)
			}
			i++
			value = args[i]
		}
		*opt.set(sig) = value
	}
	return sig, nil
}

func findSignalOption(name string, long bool) *signalOption {
	for j := range signalOptions {
		if o := &signalOptions[j]; (long && o.long == name) || (!long && o.short != "" && o.short == name) {
			return o
		}
	}
	return nil
}

// check refuses a call that names no resource to signal.
func (sig *Signal) check() error {
	switch {
	case sig.Stack == "" && sig.Resource == "":
		return fmt.Errorf("no --stack and --resource (the WaitConditionHandle URL form is not supported)")
	case sig.Stack == "":
		return fmt.Errorf("--resource %s without --stack", clip(sig.Resource))
	case sig.Resource == "":
		return fmt.Errorf("--stack %s without --resource", clip(sig.Stack))
	}
	return nil
}

// Explain says what nodeadm does with the call, for findings and `userdata explain`.
func (sig *Signal) Explain() string {
	var b strings.Builder
	fmt.Fprintf(&b, "line %d: cfn-signal for resource %s of stack %s", sig.Line, sig.Resource, sig.Stack)
	if sig.Region != "" {
		fmt.Fprintf(&b, " in %s", sig.Region)
	}
	id := "the instance ID"
	if sig.UniqueID != "" {
		id = sig.UniqueID
	}
	fmt.Fprintf(&b, ": nodeadm sends it itself once the node is Ready (SUCCESS), or FAILURE with the reason when the join fails, with unique ID %s", id)
	if sig.ExitCode != "" || sig.Success != "" {
		b.WriteString("; the exit code/--success given is ignored on purpose (such as $?, the status of an unrelated line, always 0 in a script part of its own)")
	}
	return b.String()
}

// FindSignal returns the first cfn-signal call of doc's shell parts, or nil, without
// translating anything else: when the user data does not translate (a bootstrap.sh
// call with a bad option, say), nodeadm still knows whom to tell that the join failed.
func FindSignal(doc *Document) *Signal {
	for i := range doc.Parts {
		p := &doc.Parts[i]
		if p.Kind != KindShell {
			continue
		}
		calls, err := scanScript(p.Body, p.Name(), true)
		if err == nil && len(calls.signals) > 0 {
			return calls.signals[0]
		}
	}
	return nil
}
