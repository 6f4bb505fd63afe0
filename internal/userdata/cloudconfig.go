package userdata

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/shell"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/nodejoin/nodejoin/api/nodeconfig/v1alpha1"
)

// eksctl's cloud-config for AL2 nodes writes these two files and runs its bootstrap
// scripts, which pass the file's values to bootstrap.sh.
const (
	eksctlKubeletEnv   = "/etc/eksctl/kubelet.env"
	eksctlKubeletExtra = "/etc/eksctl/kubelet-extra.json"
	eksctlScriptDir    = "/var/lib/cloud/scripts/eksctl/"
)

type cloudFile struct {
	Path        string `json:"path"`
	Content     string `json:"content"`
	Encoding    string `json:"encoding,omitempty"`
	Owner       string `json:"owner,omitempty"`
	Permissions string `json:"permissions,omitempty"`
}

func (f *cloudFile) decoded() ([]byte, error) {
	data := []byte(f.Content)
	switch strings.ToLower(f.Encoding) {
	case "", "text/plain":
		return data, nil
	case "b64", "base64":
		return decodeBase64(data)
	case "gz", "gzip":
		return gunzip(data)
	case "gz+b64", "gz+base64", "gzip+b64", "gzip+base64":
		raw, err := decodeBase64(data)
		if err != nil {
			return nil, err
		}
		return gunzip(raw)
	default:
		return nil, fmt.Errorf("encoding %q is not supported", f.Encoding)
	}
}

// cloudConfig is what nodeadm reads of a cloud-config document.
type cloudConfig struct {
	env, extra []byte          // eksctl's kubelet.env and kubelet-extra.json, when written
	script     strings.Builder // runcmd commands other than eksctl's scripts, one per line
	findings   []Finding
}

// translateCloudConfig reads eksctl's AL2 cloud-config: kubelet.env holds bootstrap.sh's
// inputs, kubelet-extra.json the kubelet configuration merged over the defaults.
// Commands and other modules are listed, never run.
func translateCloudConfig(ctx context.Context, p *Part, r Resolver) ([]*v1alpha1.NodeConfig, []Finding, error) {
	name := p.Name()
	cc, err := readCloudConfig(p.Body, name)
	if err != nil {
		return nil, nil, err
	}
	findings := cc.findings
	ignore := func(format string, args ...any) {
		findings = append(findings, Finding{Part: name, Level: LevelIgnored, Msg: fmt.Sprintf(format, args...)})
	}
	var params *al2Params
	switch {
	case cc.env != nil:
		if params, err = parseKubeletEnv(cc.env, name); err != nil {
			return nil, nil, err
		}
		if cc.script.Len() > 0 {
			ignore("runcmd commands other than eksctl's scripts are not run by nodeadm: %q", strings.TrimSpace(cc.script.String()))
		}
		ignore("eksctl's bootstrap.helper.sh also labels the node node-lifecycle=<from instance metadata> and alpha.eksctl.io/instance-id=<instance ID>; nodeadm does not add these labels")
	case cc.script.Len() > 0:
		call, err := findBootstrapCall([]byte(cc.script.String()), name+" runcmd")
		if err != nil {
			return nil, nil, err
		}
		if call == nil {
			ignore("runcmd commands are not run by nodeadm, and none calls bootstrap.sh")
			return nil, findings, nil
		}
		var more []Finding
		if params, more, err = parseBootstrapArgs(call.Args, name); err != nil {
			return nil, nil, err
		}
		findings = append(findings, more...)
	default:
		ignore("cloud-config without %s or a bootstrap.sh call configures no node", eksctlKubeletEnv)
		return nil, findings, nil
	}
	cfg, more, err := params.build(ctx, r)
	if err != nil {
		return nil, nil, err
	}
	findings = append(findings, more...)
	if cc.extra != nil {
		keys, err := mergeKubeletExtra(cfg, cc.extra, name)
		if err != nil {
			return nil, nil, err
		}
		if len(keys) > 0 {
			findings = append(findings, Finding{Part: name, Level: LevelInfo, Msg: fmt.Sprintf("%s merged into spec.kubelet.config (%s)", eksctlKubeletExtra, strings.Join(keys, ", "))})
		}
	}
	return []*v1alpha1.NodeConfig{cfg}, findings, nil
}

// readCloudConfig decodes a cloud-config document and sorts out its files and commands.
func readCloudConfig(body []byte, name string) (*cloudConfig, error) {
	body = bytes.ReplaceAll(body, []byte("\r\n"), []byte("\n"))
	var top map[string]json.RawMessage
	if err := sigsyaml.Unmarshal(body, &top); err != nil {
		return nil, fmt.Errorf("%s: cloud-config is not valid YAML: %w", name, err)
	}
	cc := &cloudConfig{}
	ignore := func(format string, args ...any) {
		cc.findings = append(cc.findings, Finding{Part: name, Level: LevelIgnored, Msg: fmt.Sprintf(format, args...)})
	}
	var files []cloudFile
	if raw, ok := top["write_files"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &files); err != nil {
			return nil, fmt.Errorf("%s: cloud-config write_files: %w", name, err)
		}
	}
	var runcmd []json.RawMessage
	if raw, ok := top["runcmd"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &runcmd); err != nil {
			return nil, fmt.Errorf("%s: cloud-config runcmd: %w", name, err)
		}
	}
	for _, k := range sortedKeys(top) {
		if k != "write_files" && k != "runcmd" && string(top[k]) != "null" {
			ignore("cloud-config module %q: cloud-init's business, not the node configuration's", k)
		}
	}
	for i := range files {
		f := &files[i]
		data, err := f.decoded()
		if err != nil {
			return nil, fmt.Errorf("%s: write_files %s: %w", name, f.Path, err)
		}
		switch {
		case f.Path == eksctlKubeletEnv:
			cc.env = data
		case f.Path == eksctlKubeletExtra:
			cc.extra = data
		case strings.HasPrefix(f.Path, eksctlScriptDir):
			cc.findings = append(cc.findings, Finding{Part: name, Level: LevelInfo, Msg: fmt.Sprintf("write_files %s: eksctl's bootstrap script; nodeadm does its work itself", f.Path)})
		default:
			ignore("write_files %s: not a file nodeadm reads; cloud-init writes it where it runs", f.Path)
		}
	}
	for _, raw := range runcmd {
		cmd, err := runcmdText(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: cloud-config runcmd entry %s: %w", name, raw, err)
		}
		if !strings.HasPrefix(cmd, eksctlScriptDir) {
			cc.script.WriteString(cmd + "\n")
		}
	}
	return cc, nil
}

// mergeKubeletExtra merges eksctl's kubelet-extra.json into spec.kubelet.config, as
// eksctl's script merges it over the kubelet config, and returns its keys.
func mergeKubeletExtra(cfg *v1alpha1.NodeConfig, extra []byte, name string) ([]string, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(extra, &doc); err != nil {
		return nil, fmt.Errorf("%s: %s is not a JSON object: %w", name, eksctlKubeletExtra, err)
	}
	keys := sortedKeys(doc)
	for _, k := range keys {
		if err := setKubeletConfig(cfg, k, doc[k]); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

var safeWordRE = regexp.MustCompile(`^[A-Za-z0-9_./=:,@+-]+$`)

// runcmdText renders a runcmd entry, a string or an argv list, as one shell line.
func runcmdText(raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var argv []string
	if err := json.Unmarshal(raw, &argv); err != nil {
		return "", fmt.Errorf("want a string or a list of strings")
	}
	// eksctl's ["/bin/bash", "-c", CMD] runs CMD.
	if len(argv) == 3 && (argv[0] == "/bin/bash" || argv[0] == "/bin/sh" || argv[0] == "bash" || argv[0] == "sh") && argv[1] == "-c" {
		return argv[2], nil
	}
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = a
		if !safeWordRE.MatchString(a) {
			quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(quoted, " "), nil
}

// parseKubeletEnv reads eksctl's kubelet.env (KEY=VALUE lines) into bootstrap inputs,
// as eksctl's bootstrap.helper.sh and bootstrap.al2.sh pass them to bootstrap.sh.
func parseKubeletEnv(data []byte, where string) (*al2Params, error) {
	p := &al2Params{where: where, retries: 3}
	vars := map[string]string{}
	for i, line := range splitLines(data) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		if !ok {
			return nil, fmt.Errorf("%s: %s line %d: want KEY=VALUE, got %q", where, eksctlKubeletEnv, i+1, clip(line))
		}
		if fields, err := shell.Fields(v, func(string) string { return "" }); err == nil && len(fields) == 1 {
			v = fields[0]
		}
		vars[k] = v
	}
	p.clusterName = vars["CLUSTER_NAME"]
	if p.clusterName == "" {
		return nil, fmt.Errorf("%s: %s has no CLUSTER_NAME", where, eksctlKubeletEnv)
	}
	p.endpoint, p.b64CA = vars["API_SERVER_URL"], vars["B64_CLUSTER_CA"]
	p.dnsClusterIP, p.clusterID = vars["CLUSTER_DNS"], vars["CLUSTER_ID"]
	// nodejoin's eksctl-style cloud-config names a service range bootstrap.sh cannot
	// infer from CLUSTER_DNS.
	p.serviceIPv4CIDR, p.serviceIPv6CIDR = vars["SERVICE_IPV4_CIDR"], vars["SERVICE_IPV6_CIDR"]
	if v := vars["ENABLE_LOCAL_OUTPOST"]; v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %s ENABLE_LOCAL_OUTPOST=%q: want true or false", where, eksctlKubeletEnv, v)
		}
		p.outpost = &b
	}
	if v := vars["MAX_PODS"]; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%s: %s MAX_PODS=%q: want a positive number", where, eksctlKubeletEnv, v)
		}
		p.maxPods = n
	}
	if err := p.containerRuntime(eksctlKubeletEnv+" CONTAINER_RUNTIME", vars["CONTAINER_RUNTIME"]); err != nil {
		return nil, fmt.Errorf("%s: %s CONTAINER_RUNTIME: %w", where, eksctlKubeletEnv, err)
	}
	if v := vars["NODE_LABELS"]; v != "" {
		p.kubeletArgs = append(p.kubeletArgs, "--node-labels="+v)
	}
	if v := vars["NODE_TAINTS"]; v != "" {
		p.kubeletArgs = append(p.kubeletArgs, "--register-with-taints="+v)
	}
	return p, nil
}
