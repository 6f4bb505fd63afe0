package userdata

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/nodejoin/nodejoin/api/nodeconfig/v1alpha1"
)

// Windows nodes bootstrap from user data holding a <powershell> block that calls the
// AMI's Start-EKSBootstrap.ps1. nodejoin runs no Windows node, but reads the call into
// the NodeConfig it means, so that Windows user data can be checked and explained.

var (
	powershellBlockRE = regexp.MustCompile(`(?is)<powershell>(.*?)(</powershell>|\z)`)
	psAssignRE        = regexp.MustCompile(`^\s*(?:\[[A-Za-z.]+\]\s*)?\$([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.+?)\s*$`)
	psRedirectRE      = regexp.MustCompile(`^[1-6*]?>>?(&[1-6])?$`)
)

// startEKSBootstrapParams maps Start-EKSBootstrap.ps1's parameters to bootstrap inputs,
// or says why nodejoin ignores one.
var startEKSBootstrapParams = map[string]bootstrapFlag{
	"EKSClusterName":    {set: setString(func(p *al2Params) *string { return &p.clusterName })},
	"APIServerEndpoint": {set: setString(func(p *al2Params) *string { return &p.endpoint })},
	"Base64ClusterCA":   {set: setString(func(p *al2Params) *string { return &p.b64CA })},
	"DNSClusterIP":      {set: setString(func(p *al2Params) *string { return &p.dnsClusterIP })},
	"ServiceCIDR": {set: func(p *al2Params, v string) error {
		if strings.Contains(v, ":") {
			p.serviceIPv6CIDR = v
		} else {
			p.serviceIPv4CIDR = v
		}
		return nil
	}},
	"KubeletExtraArgs":   bootstrapFlags["--kubelet-extra-args"],
	"ContainerRuntime":   {set: func(p *al2Params, v string) error { return p.containerRuntime("-ContainerRuntime", v) }},
	"KubeProxyExtraArgs": {ignore: "kube-proxy runs as a DaemonSet in nodejoin clusters; its arguments are the add-on's"},
	"ExcludedSnatCIDRs":  {ignore: "SNAT exclusions are the Windows VPC CNI's concern, not the node configuration's"},
}

// powershellCall is the Start-EKSBootstrap.ps1 call of a script.
type powershellCall struct {
	line int
	args []string
}

// translatePowerShell reads the Start-EKSBootstrap.ps1 call of Windows user data.
func translatePowerShell(ctx context.Context, p *Part, r Resolver) ([]*v1alpha1.NodeConfig, []Finding, error) {
	name := p.Name()
	call, err := findPowerShellCall(string(p.Body), name)
	if err != nil {
		return nil, nil, err
	}
	if call == nil {
		return nil, []Finding{{Part: name, Level: LevelIgnored, Msg: "PowerShell without a Start-EKSBootstrap.ps1 call: nodeadm runs no PowerShell"}}, nil
	}
	params := &al2Params{where: name, retries: 3, caField: "-Base64ClusterCA"}
	var findings []Finding
	for i := 0; i < len(call.args); i++ {
		a := call.args[i]
		if !strings.HasPrefix(a, "-") {
			return nil, nil, fmt.Errorf("%s: line %d: Start-EKSBootstrap.ps1 argument %q is not a -Parameter (values with spaces need quotes)", name, call.line, a)
		}
		pname, value, hasValue := strings.Cut(a[1:], ":")
		flag, ok := lookupPSParam(pname)
		if !ok {
			return nil, nil, fmt.Errorf("%s: line %d: unknown Start-EKSBootstrap.ps1 parameter -%s (known: -%s)", name, call.line, pname, strings.Join(sortedKeys(startEKSBootstrapParams), ", -"))
		}
		if !hasValue {
			if i+1 >= len(call.args) {
				return nil, nil, fmt.Errorf("%s: line %d: Start-EKSBootstrap.ps1 parameter -%s has no value", name, call.line, pname)
			}
			i++
			value = call.args[i]
		}
		if flag.ignore != "" {
			findings = append(findings, Finding{Part: name, Level: LevelIgnored, Msg: fmt.Sprintf("Start-EKSBootstrap.ps1 -%s %s: %s", pname, value, flag.ignore)})
			continue
		}
		if err := flag.set(params, value); err != nil {
			return nil, nil, fmt.Errorf("%s: line %d: Start-EKSBootstrap.ps1 -%s: %w", name, call.line, pname, err)
		}
	}
	if params.clusterName == "" {
		return nil, nil, fmt.Errorf("%s: line %d: Start-EKSBootstrap.ps1 is called without -EKSClusterName", name, call.line)
	}
	cfg, more, err := params.build(ctx, r)
	if err != nil {
		return nil, nil, err
	}
	findings = append([]Finding{{Part: name, Level: LevelInfo, Msg: fmt.Sprintf("line %d: Start-EKSBootstrap.ps1 call for cluster %s translated to a NodeConfig (a Windows node's configuration; nodejoin runs no Windows node)", call.line, params.clusterName)}}, findings...)
	return []*v1alpha1.NodeConfig{cfg}, append(findings, more...), nil
}

// lookupPSParam finds a parameter; PowerShell parameter names are case-insensitive.
func lookupPSParam(name string) (bootstrapFlag, bool) {
	for k, f := range startEKSBootstrapParams {
		if strings.EqualFold(k, name) {
			return f, true
		}
	}
	return bootstrapFlag{}, false
}

// findPowerShellCall finds the one call of Start-EKSBootstrap.ps1 in the <powershell>
// blocks of body, with its arguments expanded: variables the script assigned a
// constant before the call are substituted.
func findPowerShellCall(body, where string) (*powershellCall, error) {
	body = strings.ReplaceAll(body, "\r\n", "\n")
	var script strings.Builder
	blocks := powershellBlockRE.FindAllStringSubmatchIndex(body, -1)
	if len(blocks) == 0 {
		return nil, fmt.Errorf("%s: no <powershell> block", where)
	}
	// Keep line numbers: blank out what lies outside the blocks.
	last := 0
	for _, b := range blocks {
		script.WriteString(strings.Repeat("\n", strings.Count(body[last:b[2]], "\n")))
		script.WriteString(body[b[2]:b[3]])
		last = b[3]
	}
	vars := map[string]string{}
	var calls []*powershellCall
	lines := strings.Split(script.String(), "\n")
	for i := 0; i < len(lines); i++ {
		lineNo := i + 1
		line := lines[i]
		// A backtick at the end of a line continues the command.
		for strings.HasSuffix(strings.TrimRight(line, " \t"), "`") && i+1 < len(lines) {
			line = strings.TrimSuffix(strings.TrimRight(line, " \t"), "`") + " " + lines[i+1]
			i++
		}
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if m := psAssignRE.FindStringSubmatch(trimmed); m != nil {
			if toks, err := psTokens(m[2], vars); err == nil && len(toks) == 1 {
				vars[strings.ToLower(m[1])] = toks[0]
			} else {
				delete(vars, strings.ToLower(m[1]))
			}
			continue
		}
		if !strings.Contains(strings.ToLower(trimmed), "start-eksbootstrap.ps1") && !strings.HasPrefix(trimmed, "&") {
			continue
		}
		toks, err := psTokens(strings.TrimPrefix(trimmed, "&"), vars)
		if err != nil {
			return nil, fmt.Errorf("%s: line %d: %w", where, lineNo, err)
		}
		if len(toks) == 0 || !strings.HasSuffix(strings.ToLower(toks[0]), "start-eksbootstrap.ps1") {
			continue
		}
		var args []string
		for _, t := range toks[1:] {
			if !psRedirectRE.MatchString(t) {
				args = append(args, t)
			}
		}
		calls = append(calls, &powershellCall{line: lineNo, args: args})
	}
	switch len(calls) {
	case 0:
		return nil, nil
	case 1:
		return calls[0], nil
	}
	return nil, fmt.Errorf("%s: Start-EKSBootstrap.ps1 is called %d times (lines %d and %d); a node bootstraps once", where, len(calls), calls[0].line, calls[1].line)
}

// psTokens splits a PowerShell command line into arguments: 'verbatim' strings (” is
// a quote), "expandable" strings (backtick escapes, $var and ${var} from vars, $env:X
// kept as written), and bare words (with $var expanded). A variable the script did
// not set to a constant is an error that names it.
//
//nolint:gocyclo // a tokenizer's state machine, one case per character class.
func psTokens(s string, vars map[string]string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inWord := false
	expand := func(rs []rune, i int) (string, int, error) {
		// rs[i] == '$'
		j := i + 1
		if j < len(rs) && rs[j] == '{' {
			end := strings.IndexRune(string(rs[j:]), '}')
			if end < 0 {
				return "", 0, fmt.Errorf("unclosed ${")
			}
			name := string(rs[j+1 : j+end])
			v, ok := vars[strings.ToLower(name)]
			if !ok {
				return "", 0, fmt.Errorf("variable $%s is not set to a constant before the call", name)
			}
			return v, j + end + 1, nil
		}
		k := j
		for k < len(rs) && (rs[k] == '_' || rs[k] == ':' || rs[k] >= 'a' && rs[k] <= 'z' || rs[k] >= 'A' && rs[k] <= 'Z' || rs[k] >= '0' && rs[k] <= '9') {
			k++
		}
		name := string(rs[j:k])
		if name == "" {
			return "$", j, nil
		}
		if strings.HasPrefix(strings.ToLower(name), "env:") {
			return "$" + name, k, nil
		}
		v, ok := vars[strings.ToLower(name)]
		if !ok {
			return "", 0, fmt.Errorf("variable $%s is not set to a constant before the call", name)
		}
		return v, k, nil
	}
	rs := []rune(s)
	for i := 0; i < len(rs); {
		c := rs[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
			i++
		case c == '\'':
			inWord = true
			i++
			for {
				if i >= len(rs) {
					return nil, fmt.Errorf("unterminated '-quoted string")
				}
				if rs[i] == '\'' {
					if i+1 < len(rs) && rs[i+1] == '\'' {
						cur.WriteRune('\'')
						i += 2
						continue
					}
					i++
					break
				}
				cur.WriteRune(rs[i])
				i++
			}
		case c == '"':
			inWord = true
			i++
			for {
				if i >= len(rs) {
					return nil, fmt.Errorf("unterminated \"-quoted string")
				}
				if rs[i] == '"' {
					i++
					break
				}
				if rs[i] == '`' && i+1 < len(rs) {
					cur.WriteRune(psEscape(rs[i+1]))
					i += 2
					continue
				}
				if rs[i] == '$' {
					v, next, err := expand(rs, i)
					if err != nil {
						return nil, err
					}
					cur.WriteString(v)
					i = next
					continue
				}
				cur.WriteRune(rs[i])
				i++
			}
		case c == '`' && i+1 < len(rs):
			inWord = true
			cur.WriteRune(psEscape(rs[i+1]))
			i += 2
		case c == '$':
			inWord = true
			v, next, err := expand(rs, i)
			if err != nil {
				return nil, err
			}
			cur.WriteString(v)
			i = next
		case c == ';' || c == '|':
			return nil, fmt.Errorf("only one command per line is read; %q ends it", string(c))
		default:
			inWord = true
			cur.WriteRune(c)
			i++
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out, nil
}

// psEscape is the character a backtick escape stands for.
func psEscape(c rune) rune {
	switch c {
	case 'n':
		return '\n'
	case 't':
		return '\t'
	case 'r':
		return '\r'
	case '0':
		return 0
	}
	return c
}
