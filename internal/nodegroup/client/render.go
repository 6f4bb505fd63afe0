package client

import (
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/nodegroup"
	"github.com/nodejoin/nodejoin/internal/nodegroup/userdata"
)

// RenderOptions are the options of `nodejoin userdata render`: the file holding the
// node group (what `nodejoin create nodegroup -f` takes), and the cluster its user data
// points at.
type RenderOptions struct {
	file, nodeGroup, family, style    string
	kubeconfig, clusterName, endpoint string
	caFile, serviceCIDR, dnsIP        string
	cloudFormation, base64            bool
}

// AddFlags binds the options to fs.
func (o *RenderOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVarP(&o.file, "filename", "f", "", "eksctl ClusterConfig or NodeGroup manifests, as create nodegroup takes them; - reads standard input")
	fs.StringVar(&o.nodeGroup, "nodegroup", "", "the node group of the file to render (needed when it holds more than one)")
	fs.StringVar(&o.family, "family", "", "AMI family, overriding the manifest's: AmazonLinux2023, AmazonLinux2, Bottlerocket, Windows")
	fs.StringVar(&o.style, "style", "", "whose user data, overriding the manifest's spec.template.userDataStyle: managed (EKS managed node groups) or eksctl (self-managed)")
	fs.BoolVar(&o.cloudFormation, "cloudformation", false, "print the self-managed node group's CloudFormation template instead")
	fs.BoolVar(&o.base64, "base64", false, "print the user data base64-encoded, as a launch template holds it")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig whose current context gives the endpoint, CA and cluster name (default: $KUBECONFIG, ~/.kube/config)")
	fs.StringVar(&o.clusterName, "cluster-name", "", "the cluster's name (default: an eksctl file's metadata.name, else the kubeconfig's current cluster)")
	fs.StringVar(&o.endpoint, "endpoint", "", "the API server's https:// URL (default: the kubeconfig's)")
	fs.StringVar(&o.caFile, "ca-file", "", "the cluster CA bundle, PEM (default: the kubeconfig's)")
	fs.StringVar(&o.serviceCIDR, "service-cidr", "10.100.0.0/16", "the cluster's service CIDR")
	fs.StringVar(&o.dnsIP, "dns-cluster-ip", "", "the cluster DNS address (default: the service CIDR's .10)")
}

// Render writes the user data of the node group's instances, or the self-managed node
// group's CloudFormation template, to out; stdin is read for -f -.
func (o *RenderOptions) Render(out io.Writer, stdin io.Reader) error {
	if o.file == "" {
		return fmt.Errorf("-f is required: the eksctl ClusterConfig or NodeGroup manifest to render (- for standard input)")
	}
	var style v1alpha1.UserDataStyle
	switch userdata.Style(strings.ToLower(o.style)) {
	case "":
	case userdata.Managed:
		style = v1alpha1.UserDataStyleManaged
	case userdata.SelfManaged:
		style = v1alpha1.UserDataStyleEksctl
	default:
		return fmt.Errorf("--style %q: want managed or eksctl", o.style)
	}
	l, err := o.load(stdin)
	if err != nil {
		return err
	}
	tmpl, err := o.template(l, style)
	if err != nil {
		return err
	}
	if o.clusterName == "" {
		o.clusterName = l.Cluster
	}
	if o.family != "" {
		if tmpl.Family, err = v1alpha1.ParseAMIFamily(o.family); err != nil {
			return fmt.Errorf("--family: %w", err)
		}
	}
	cluster, err := renderCluster(o)
	if err != nil {
		return err
	}
	if o.cloudFormation {
		doc, err := userdata.RenderCloudFormation(cluster, tmpl)
		if err != nil {
			return err
		}
		_, err = out.Write(doc)
		return err
	}
	ud, err := userdata.Render(cluster, tmpl)
	if err != nil {
		return err
	}
	binary := len(ud) > 1 && ud[0] == 0x1f && ud[1] == 0x8b
	if o.base64 || binary {
		_, err = fmt.Fprintln(out, base64.StdEncoding.EncodeToString(ud))
		return err
	}
	_, err = out.Write(ud)
	return err
}

// load reads -f (stdin for -) as create nodegroup does.
func (o *RenderOptions) load(stdin io.Reader) (*Loaded, error) {
	var data []byte
	var err error
	source := o.file
	if o.file == "-" {
		source = "standard input"
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(o.file)
	}
	if err != nil {
		return nil, fmt.Errorf("reading -f: %w", err)
	}
	return Load(data, source)
}

// template picks the group to render (--nodegroup, or the file's only one), defaults
// it and returns the template the controller renders from it; a style replaces the
// group's spec.template.userDataStyle.
func (o *RenderOptions) template(l *Loaded, style v1alpha1.UserDataStyle) (userdata.Template, error) {
	var ng *v1alpha1.NodeGroup
	switch {
	case o.nodeGroup != "":
		var err error
		if ng, err = l.Group(o.nodeGroup); err != nil {
			return userdata.Template{}, fmt.Errorf("--nodegroup: %w", err)
		}
	case len(l.NodeGroups) == 1:
		ng = &l.NodeGroups[0]
	default:
		names := make([]string, len(l.NodeGroups))
		for i := range l.NodeGroups {
			names[i] = l.NodeGroups[i].Name
		}
		return userdata.Template{}, fmt.Errorf("%s holds %d node groups (%s): name the one to render with --nodegroup", l.Source, len(names), strings.Join(names, ", "))
	}
	ng = ng.DeepCopy()
	if style != "" {
		ng.Spec.Template.UserDataStyle = style
	}
	ng.Default()
	if errs := ng.Validate(); len(errs) > 0 {
		return userdata.Template{}, fmt.Errorf("%s: node group %s: %w", l.Source, ng.Name, errs.ToAggregate())
	}
	t, err := nodegroup.Template(ng)
	if err != nil {
		return userdata.Template{}, fmt.Errorf("%s: node group %s: %w", l.Source, ng.Name, err)
	}
	sc := ng.Spec.Scaling
	t.Scaling = &userdata.Scaling{Min: sc.MinSize, Max: sc.MaxSize, Desired: sc.Desired()}
	return t, nil
}

// renderCluster takes the cluster from the flags, and what they leave out from the
// kubeconfig's current context.
func renderCluster(f *RenderOptions) (userdata.Cluster, error) {
	c := userdata.Cluster{Name: f.clusterName, Endpoint: f.endpoint, ServiceCIDR: f.serviceCIDR, DNSClusterIP: f.dnsIP}
	if f.caFile != "" {
		ca, err := os.ReadFile(f.caFile)
		if err != nil {
			return c, fmt.Errorf("--ca-file: %w", err)
		}
		if !strings.Contains(string(ca), "-----BEGIN CERTIFICATE-----") {
			return c, fmt.Errorf("--ca-file %s: no PEM certificate in it", f.caFile)
		}
		c.CertificateAuthority = ca
	}
	if c.Name != "" && c.Endpoint != "" && len(c.CertificateAuthority) > 0 {
		return c, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if f.kubeconfig != "" {
		rules.ExplicitPath = f.kubeconfig
	}
	raw, err := rules.Load()
	if err != nil {
		return c, fmt.Errorf("reading the kubeconfig for the cluster's endpoint and CA: %w (or give --cluster-name, --endpoint and --ca-file)", err)
	}
	ctx, ok := raw.Contexts[raw.CurrentContext]
	if !ok {
		return c, fmt.Errorf("the kubeconfig has no current context; give --cluster-name, --endpoint and --ca-file, or --kubeconfig")
	}
	kc, ok := raw.Clusters[ctx.Cluster]
	if !ok {
		return c, fmt.Errorf("the kubeconfig's context %s names cluster %q, which it does not define", raw.CurrentContext, ctx.Cluster)
	}
	if c.Name == "" {
		c.Name = ctx.Cluster
	}
	if c.Endpoint == "" {
		c.Endpoint = kc.Server
	}
	if len(c.CertificateAuthority) == 0 {
		c.CertificateAuthority = kc.CertificateAuthorityData
		if len(c.CertificateAuthority) == 0 && kc.CertificateAuthority != "" {
			if c.CertificateAuthority, err = os.ReadFile(kc.CertificateAuthority); err != nil {
				return c, fmt.Errorf("the kubeconfig's CA file: %w", err)
			}
		}
		if len(c.CertificateAuthority) == 0 {
			return c, fmt.Errorf("the kubeconfig's cluster %s has no CA; give --ca-file", ctx.Cluster)
		}
	}
	return c, nil
}
