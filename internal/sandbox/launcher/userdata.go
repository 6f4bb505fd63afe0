package launcher

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"text/template"
	"text/template/parse"

	"github.com/nodejoin/nodejoin/internal/editdistance"
	"github.com/nodejoin/nodejoin/internal/nodeadm/nodeconfig"
	"github.com/nodejoin/nodejoin/internal/sandbox/instance"
)

// UserDataFields are the local cluster's values a user's own user data may ask for,
// as Go template fields: {{.ClusterName}}, {{.APIServerEndpoint}} and so on. Nothing
// else in the user data is changed.
type UserDataFields struct {
	// ClusterName is the cluster's name, the one EKS DescribeCluster knows.
	ClusterName string
	// APIServerEndpoint is the API server's URL as the instance reaches it.
	APIServerEndpoint string
	// CertificateAuthority is base64 of the cluster CA's PEM, as EKS gives it
	// (DescribeCluster's certificateAuthority.data, bootstrap.sh's --b64-cluster-ca).
	CertificateAuthority string
	// ServiceCIDR is the cluster's Kubernetes service range.
	ServiceCIDR string
	// ClusterDNS is the cluster DNS address (kube-dns's service IP): the service
	// range's .10, as EKS gives CoreDNS.
	ClusterDNS string
}

// MaxUserData is EC2's limit on an instance's user data: 16 KiB, raw, before base64.
const MaxUserData = 16 * 1024

// UserDataFieldNames lists the template fields, sorted, each with its leading dot.
func UserDataFieldNames() []string {
	t := reflect.TypeFor[UserDataFields]()
	names := make([]string, t.NumField())
	for i := range names {
		names[i] = "." + t.Field(i).Name
	}
	slices.Sort(names)
	return names
}

// IsGzip tells gzip data (eksctl's user data is gzip'd cloud-config) by its magic bytes.
func IsGzip(data []byte) bool { return len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b }

// CheckUserData checks a user's user data before an instance boots with it: within
// EC2's size limit and, unless it is gzip data (passed on untouched), template text
// that names only UserDataFields. source names the data in errors (a file name, or
// "standard input").
func CheckUserData(source string, data []byte) error {
	_, err := parseUserData(source, data)
	return err
}

// RenderUserData fills a user's user data's template fields with f; gzip data is
// returned as it is.
func RenderUserData(source string, data []byte, f UserDataFields) ([]byte, error) {
	tmpl, err := parseUserData(source, data)
	if err != nil || tmpl == nil {
		return data, err
	}
	var out bytes.Buffer
	if err := tmpl.Execute(&out, f); err != nil {
		return nil, fmt.Errorf("user data %s: %s", source, strings.TrimPrefix(err.Error(), "template: "))
	}
	if out.Len() > MaxUserData {
		return nil, fmt.Errorf("user data %s: %d bytes once its fields are filled in, more than EC2's %d (gzip it, as eksctl does, and fill in the values yourself)", source, out.Len(), MaxUserData)
	}
	return out.Bytes(), nil
}

// parseUserData parses data as template text; nil for gzip data.
func parseUserData(source string, data []byte) (*template.Template, error) {
	switch {
	case len(bytes.TrimSpace(data)) == 0:
		return nil, fmt.Errorf("user data %s is empty", source)
	case len(data) > MaxUserData:
		return nil, fmt.Errorf("user data %s: %d bytes, more than EC2's %d (gzip it, as eksctl does)", source, len(data), MaxUserData)
	case IsGzip(data):
		return nil, nil
	}
	tmpl, err := template.New(source).Option("missingkey=error").Parse(string(data))
	if err != nil {
		return nil, fmt.Errorf("user data %s is not valid template text: %s (a literal {{ is written {{\"{{\"}})", source, strings.TrimPrefix(err.Error(), "template: "))
	}
	for _, t := range tmpl.Templates() {
		if t.Tree == nil {
			continue
		}
		if err := checkFields(source, data, t.Root); err != nil {
			return nil, err
		}
	}
	// Everything else a template can get wrong (a function given the wrong
	// arguments, say) shows when it runs.
	if err := tmpl.Execute(&bytes.Buffer{}, UserDataFields{}); err != nil {
		return nil, fmt.Errorf("user data %s: %s", source, strings.TrimPrefix(err.Error(), "template: "))
	}
	return tmpl, nil
}

// checkFields refuses a field UserDataFields lacks, anywhere under n, naming source,
// the line and the field.
func checkFields(source string, data []byte, n parse.Node) error {
	if err := checkField(source, data, n); err != nil {
		return err
	}
	for _, c := range children(n) {
		if err := checkFields(source, data, c); err != nil {
			return err
		}
	}
	return nil
}

// children lists the nodes under n that may name fields.
func children(n parse.Node) []parse.Node {
	switch n := n.(type) {
	case *parse.ListNode:
		if n != nil {
			return n.Nodes
		}
	case *parse.ActionNode:
		return []parse.Node{n.Pipe}
	case *parse.TemplateNode:
		return []parse.Node{n.Pipe}
	case *parse.PipeNode:
		if n == nil {
			return nil
		}
		out := make([]parse.Node, len(n.Cmds))
		for i, c := range n.Cmds {
			out[i] = c
		}
		return out
	case *parse.CommandNode:
		return n.Args
	case *parse.IfNode:
		return []parse.Node{n.Pipe, n.List, n.ElseList}
	case *parse.WithNode:
		return []parse.Node{n.Pipe, n.List, n.ElseList}
	case *parse.RangeNode:
		return []parse.Node{n.Pipe, n.List, n.ElseList}
	case *parse.ChainNode:
		return []parse.Node{n.Node}
	}
	return nil
}

// checkField refuses n when it names a field UserDataFields lacks.
func checkField(source string, data []byte, n parse.Node) error {
	var field []string
	switch n := n.(type) {
	case *parse.ChainNode:
		return fieldError(source, data, n.Position(), n.String(), "the fields are strings, which have no fields")
	case *parse.VariableNode:
		if len(n.Ident) < 2 || n.Ident[0] != "$" {
			return nil
		}
		field = n.Ident[1:]
	case *parse.FieldNode:
		field = n.Ident
	default:
		return nil
	}
	known := UserDataFieldNames()
	name := "." + field[0]
	if !slices.Contains(known, name) {
		return fieldError(source, data, n.Position(), name, unknownWant(name, known))
	}
	if len(field) > 1 {
		return fieldError(source, data, n.Position(), "."+strings.Join(field, "."), name+" is a string, which has no fields")
	}
	return nil
}

// fieldError names source, the line of byte offset pos, and the field.
func fieldError(source string, data []byte, pos parse.Pos, field, want string) error {
	line := 1 + bytes.Count(data[:min(int(pos), len(data))], []byte("\n"))
	return fmt.Errorf("user data %s, line %d: unknown template field %s: %s", source, line, field, want)
}

// unknownWant lists the known fields, with the nearest one first when it is close.
func unknownWant(name string, known []string) string {
	best, dist := "", len(name)
	for _, k := range known {
		if d := editdistance.Levenshtein(strings.ToLower(name), strings.ToLower(k)); d < dist {
			best, dist = k, d
		}
	}
	all := "the fields are " + strings.Join(known, ", ")
	if best != "" && dist <= len(best)/3 {
		return "did you mean " + best + "? (" + all + ")"
	}
	return all
}

// userDataFields are the cluster's values for an instance whose kubelet is kind:
// a simulated kubelet reaches the API server from the host.
func (lr *Launcher) userDataFields(kind instance.KubeletKind) (UserDataFields, error) {
	c := lr.cluster
	f := UserDataFields{ClusterName: c.Name, APIServerEndpoint: c.Endpoint, CertificateAuthority: base64.StdEncoding.EncodeToString(c.CAPEM)}
	if kind == instance.KubeletSim && lr.hostEndpoint != "" {
		f.APIServerEndpoint = lr.hostEndpoint
	}
	if c.ServiceCIDR.IsValid() {
		f.ServiceCIDR = c.ServiceCIDR.Masked().String()
		dns, err := nodeconfig.ClusterDNS(f.ServiceCIDR)
		if err != nil {
			return f, err
		}
		f.ClusterDNS = dns
	}
	return f, nil
}
