package userdata

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
)

// windowsScriptFile is where EKS's Windows AMIs keep their bootstrap script.
const windowsScriptFile = `[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\Amazon\EKS\Start-EKSBootstrap.ps1"`

// windows is Windows user data: one <powershell> block with the user's commands first,
// then the call of Start-EKSBootstrap.ps1 (EKS documents this order for managed
// groups). Self-managed groups get eksctl's call (double-quoted values, -ServiceCIDR,
// -ContainerRuntime); managed ones EKS's (single-quoted values, -DNSClusterIP).
func (r *renderer) windows() ([]byte, error) {
	where := "node group " + r.t.NodeGroupName
	if len(r.t.Kubelet) > 0 {
		return nil, fmt.Errorf("%s: kubelet configuration is not supported for %s nodes: Start-EKSBootstrap.ps1 takes only kubelet flags; set labels, taints and maxPods instead", where, v1alpha1.AMIFamilyWindows)
	}
	var b strings.Builder
	b.WriteString("<powershell>\n")
	for _, c := range r.t.PreBootstrapCommands {
		b.WriteString(strings.TrimRight(c, "\n") + "\n")
	}
	if user := powershellBody(r.t.UserData); user != "" {
		b.WriteString(user + "\n")
	}
	b.WriteString(windowsScriptFile + "\n")

	extra := []string{"--node-labels=" + labelsArg(r.labels), "--register-with-taints=" + taintsArg(r.t.Taints)}
	maxPods := r.maxPods
	if r.t.Style == Managed {
		maxPods = r.managedMaxPods()
	}
	if maxPods > 0 {
		extra = append(extra, fmt.Sprintf("--max-pods=%d", maxPods))
	}
	type param struct{ name, value string }
	var params []param
	quote := psSingle
	if r.t.Style == SelfManaged {
		quote = psDouble
		params = []param{{"EKSClusterName", r.c.Name}, {"APIServerEndpoint", r.c.Endpoint}, {"Base64ClusterCA", r.caB64},
			{"ServiceCIDR", r.c.ServiceCIDR}, {"DNSClusterIP", r.c.DNSClusterIP}, {"ContainerRuntime", "containerd"},
			{"KubeletExtraArgs", strings.Join(extra, " ")}}
	} else {
		cidr := r.c.ServiceCIDR
		if r.cidrInferable() {
			cidr = "" // Start-EKSBootstrap.ps1 infers it from the DNS address
		}
		params = []param{{"EKSClusterName", r.c.Name}, {"APIServerEndpoint", r.c.Endpoint}, {"Base64ClusterCA", r.caB64},
			{"KubeletExtraArgs", strings.Join(extra, " ")}, {"DNSClusterIP", r.dns}, {"ServiceCIDR", cidr}}
	}
	b.WriteString("& $EKSBootstrapScriptFile")
	for _, p := range params {
		if p.value != "" { // empty parameters are left out, as eksctl does
			fmt.Fprintf(&b, " -%s %s", p.name, quote(p.value))
		}
	}
	b.WriteString(" 3>&1 4>&1 5>&1 6>&1\n</powershell>\n")
	return []byte(b.String()), nil
}

var powershellTagRE = regexp.MustCompile(`(?i)</?powershell>`)

// powershellBody is the user's PowerShell without its <powershell> tags.
func powershellBody(data string) string {
	return strings.TrimSpace(powershellTagRE.ReplaceAllString(strings.ReplaceAll(data, "\r\n", "\n"), ""))
}

// psDouble quotes s as a PowerShell expandable string, escaping what would expand.
func psDouble(s string) string {
	r := strings.NewReplacer("`", "``", `"`, "`\"", "$", "`$")
	return `"` + r.Replace(s) + `"`
}

// psSingle quotes s as a PowerShell verbatim string.
func psSingle(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
