package nodejoin

import (
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/nodejoin/nodejoin/internal/nodegroup/userdata"
)

func userdataCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "userdata",
		Short: "Generate node user data",
		Example: "  nodejoin userdata render -f nodegroup.yaml --kubeconfig ~/.kube/config\n" +
			"  nodejoin userdata render -f nodegroup.yaml --cluster-name demo --endpoint https://10.0.0.1:6443 --ca-file ca.crt",
	}
	cmd.AddCommand(userdataRenderCommand())
	return cmd
}

type renderFlags struct {
	file, family, style               string
	kubeconfig, clusterName, endpoint string
	caFile, serviceCIDR, dnsIP        string
	cloudFormation, base64            bool
}

func userdataRenderCommand() *cobra.Command {
	var f renderFlags
	cmd := &cobra.Command{
		Use:   "render -f NODEGROUP.yaml",
		Short: "Print the user data of a NodeGroup's instances, or a self-managed node group's CloudFormation template",
		Long: "Render prints the user data a NodeGroup's instances boot with, as EKS managed node groups\n" +
			"(--style managed) or eksctl's self-managed groups (--style eksctl) generate it for the AMI\n" +
			"family, merged with the template's own userData. Text is printed as the instance reads it;\n" +
			"gzip-compressed user data (eksctl's AL2 cloud-config) and --base64 print the base64 a launch\n" +
			"template's UserData holds. The cluster comes from --endpoint/--ca-file, or from a kubeconfig.",
		Example: "  nodejoin userdata render -f nodegroup.yaml --family Bottlerocket\n" +
			"  nodejoin userdata render -f nodegroup.yaml --cloudformation > nodes.yaml\n" +
			"  nodejoin userdata render -f nodegroup.yaml --cluster-name demo --endpoint https://10.0.0.1:6443 --ca-file ca.crt --service-cidr 10.100.0.0/16",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runRender(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.file, "filename", "f", "", "NodeGroup manifest (nodejoin.io/v1alpha1); - reads standard input")
	fl.StringVar(&f.family, "family", "", "AMI family, overriding the manifest's: AmazonLinux2023, AmazonLinux2, Bottlerocket, Windows")
	fl.StringVar(&f.style, "style", string(userdata.Managed), "whose user data: managed (EKS managed node groups) or eksctl (self-managed)")
	fl.BoolVar(&f.cloudFormation, "cloudformation", false, "print the self-managed node group's CloudFormation template instead")
	fl.BoolVar(&f.base64, "base64", false, "print the user data base64-encoded, as a launch template holds it")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig whose current context gives the endpoint, CA and cluster name (default: $KUBECONFIG, ~/.kube/config)")
	fl.StringVar(&f.clusterName, "cluster-name", "", "the cluster's name (default: the kubeconfig's current cluster)")
	fl.StringVar(&f.endpoint, "endpoint", "", "the API server's https:// URL (default: the kubeconfig's)")
	fl.StringVar(&f.caFile, "ca-file", "", "the cluster CA bundle, PEM (default: the kubeconfig's)")
	fl.StringVar(&f.serviceCIDR, "service-cidr", "10.100.0.0/16", "the cluster's service CIDR")
	fl.StringVar(&f.dnsIP, "dns-cluster-ip", "", "the cluster DNS address (default: the service CIDR's .10)")
	return cmd
}

func runRender(cmd *cobra.Command, f renderFlags) error {
	if f.file == "" {
		return fmt.Errorf("-f is required: the NodeGroup manifest to render (- for standard input)")
	}
	style := userdata.Style(f.style)
	if style != userdata.Managed && style != userdata.SelfManaged {
		return fmt.Errorf("--style %q: want managed or eksctl", f.style)
	}
	var data []byte
	var err error
	if f.file == "-" {
		data, err = io.ReadAll(cmd.InOrStdin())
	} else {
		data, err = os.ReadFile(f.file)
	}
	if err != nil {
		return fmt.Errorf("reading the NodeGroup manifest: %w", err)
	}
	tmpl, err := parseNodeGroup(data, f.file)
	if err != nil {
		return err
	}
	tmpl.Style = style
	if f.family != "" {
		if tmpl.Family, err = userdata.ParseFamily(f.family); err != nil {
			return fmt.Errorf("--family: %w", err)
		}
	}
	cluster, err := renderCluster(f)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if f.cloudFormation {
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
	if f.base64 || binary {
		_, err = fmt.Fprintln(out, base64.StdEncoding.EncodeToString(ud))
		return err
	}
	_, err = out.Write(ud)
	return err
}

// nodeGroupManifest holds what render reads of a NodeGroup (nodejoin.io/v1alpha1):
// its name, sizes and instance template, by the API's JSON names.
type nodeGroupManifest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Scaling struct {
			MinSize     int32  `json:"minSize"`
			MaxSize     int32  `json:"maxSize"`
			DesiredSize *int32 `json:"desiredSize"`
		} `json:"scaling"`
		Template struct {
			AMIFamily            string            `json:"amiFamily"`
			AMIID                string            `json:"amiID"`
			InstanceTypes        []string          `json:"instanceTypes"`
			CapacityType         string            `json:"capacityType"`
			Labels               map[string]string `json:"labels"`
			Taints               []corev1.Taint    `json:"taints"`
			Kubelet              map[string]any    `json:"kubelet"`
			MaxPods              *int32            `json:"maxPods"`
			PreBootstrapCommands []string          `json:"preBootstrapCommands"`
			UserData             string            `json:"userData"`
		} `json:"template"`
	} `json:"spec"`
}

func parseNodeGroup(data []byte, source string) (userdata.Template, error) {
	var m nodeGroupManifest
	if err := sigsyaml.Unmarshal(data, &m); err != nil {
		return userdata.Template{}, fmt.Errorf("%s: not a NodeGroup manifest: %w", source, err)
	}
	if m.Kind != "NodeGroup" || m.APIVersion != "nodejoin.io/v1alpha1" {
		return userdata.Template{}, fmt.Errorf("%s: kind %q, apiVersion %q: want a NodeGroup of nodejoin.io/v1alpha1", source, m.Kind, m.APIVersion)
	}
	if m.Metadata.Name == "" {
		return userdata.Template{}, fmt.Errorf("%s: metadata.name is required", source)
	}
	tp := m.Spec.Template
	t := userdata.Template{
		Family: userdata.AmazonLinux2023, NodeGroupName: m.Metadata.Name, CapacityType: tp.CapacityType,
		Labels: tp.Labels, Taints: tp.Taints, Kubelet: tp.Kubelet, MaxPods: tp.MaxPods,
		PreBootstrapCommands: tp.PreBootstrapCommands, UserData: tp.UserData, AMIID: tp.AMIID,
	}
	if tp.AMIFamily != "" {
		f, err := userdata.ParseFamily(tp.AMIFamily)
		if err != nil {
			return userdata.Template{}, fmt.Errorf("%s: spec.template.amiFamily: %w", source, err)
		}
		t.Family = f
	}
	if len(tp.InstanceTypes) > 0 {
		t.InstanceType = tp.InstanceTypes[0]
	}
	sc := m.Spec.Scaling
	if sc.MaxSize > 0 {
		desired := sc.MinSize
		if sc.DesiredSize != nil {
			desired = *sc.DesiredSize
		}
		t.Scaling = &userdata.Scaling{Min: sc.MinSize, Max: sc.MaxSize, Desired: desired}
	}
	return t, nil
}

// renderCluster takes the cluster from the flags, and what they leave out from the
// kubeconfig's current context.
func renderCluster(f renderFlags) (userdata.Cluster, error) {
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
