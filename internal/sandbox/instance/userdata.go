package instance

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/netip"
	"strings"
)

// AMIFamily picks the user-data format of an instance, as EKS's launch templates do.
type AMIFamily string

// The AMI families whose user data local instances carry.
const (
	AmazonLinux2    AMIFamily = "AmazonLinux2"
	AmazonLinux2023 AMIFamily = "AmazonLinux2023"
	Bottlerocket    AMIFamily = "Bottlerocket"
)

// AMIFamilies lists the families in the order help texts show them.
var AMIFamilies = []AMIFamily{AmazonLinux2023, AmazonLinux2, Bottlerocket}

// ParseAMIFamily accepts a family name as EKS spells it (AL2, AL2023 too).
func ParseAMIFamily(s string) (AMIFamily, error) {
	switch strings.ToLower(s) {
	case "", "amazonlinux2023", "al2023":
		return AmazonLinux2023, nil
	case "amazonlinux2", "al2":
		return AmazonLinux2, nil
	case "bottlerocket":
		return Bottlerocket, nil
	}
	return "", fmt.Errorf("AMI family %q: want one of AmazonLinux2023, AmazonLinux2, Bottlerocket", s)
}

// ClusterInfo is what a node's user data must say about its cluster.
type ClusterInfo struct {
	Name        string
	Endpoint    string
	CAPEM       []byte
	ServiceCIDR netip.Prefix
}

// dnsIP is the cluster DNS address EKS derives: the service range's tenth address.
func (c ClusterInfo) dnsIP() string {
	a := c.ServiceCIDR.Masked().Addr()
	for range 10 {
		a = a.Next()
	}
	return a.String()
}

const mimeBoundary = "//"

// UserData renders the user data an EKS launch template would give a node of family f
// in cluster c. A non-empty bootstrapToken is carried the way nodejoin reads it: a
// NodeJoinConfig MIME part, or Bottlerocket's settings.kubernetes.bootstrap-token.
func UserData(f AMIFamily, c ClusterInfo, bootstrapToken string) ([]byte, error) {
	if c.Name == "" || c.Endpoint == "" || len(c.CAPEM) == 0 || !c.ServiceCIDR.IsValid() {
		return nil, fmt.Errorf("user data for cluster %q: name, endpoint, CA and service range are all required", c.Name)
	}
	ca := base64.StdEncoding.EncodeToString(c.CAPEM)
	switch f {
	case Bottlerocket:
		var b bytes.Buffer
		fmt.Fprintf(&b, "[settings.kubernetes]\ncluster-name = %q\napi-server = %q\ncluster-certificate = %q\ncluster-dns-ip = %q\n",
			c.Name, c.Endpoint, ca, c.dnsIP())
		if bootstrapToken != "" {
			fmt.Fprintf(&b, "bootstrap-token = %q\n", bootstrapToken)
		}
		return b.Bytes(), nil
	case AmazonLinux2:
		script := fmt.Sprintf("#!/bin/bash\nset -ex\n/etc/eks/bootstrap.sh %s --apiserver-endpoint %s --b64-cluster-ca %s --dns-cluster-ip %s\n",
			c.Name, c.Endpoint, ca, c.dnsIP())
		return mime(part{"text/x-shellscript; charset=\"us-ascii\"", script}, tokenPart(bootstrapToken)), nil
	case AmazonLinux2023, "":
		nodeConfig := fmt.Sprintf("---\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: %s\n    apiServerEndpoint: %s\n    certificateAuthority: %s\n    cidr: %s\n",
			c.Name, c.Endpoint, ca, c.ServiceCIDR.Masked())
		return mime(part{"application/node.eks.aws", nodeConfig}, tokenPart(bootstrapToken)), nil
	}
	return nil, fmt.Errorf("AMI family %q: want one of AmazonLinux2023, AmazonLinux2, Bottlerocket", f)
}

type part struct{ contentType, body string }

func tokenPart(token string) part {
	if token == "" {
		return part{}
	}
	return part{"application/nodejoin.io", "apiVersion: nodejoin.io/v1alpha1\nkind: NodeJoinConfig\nspec:\n  bootstrapToken: " + token + "\n"}
}

// mime builds multipart/mixed user data, as EKS managed node groups send it.
func mime(parts ...part) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=%q\n\n", mimeBoundary)
	for _, p := range parts {
		if p.contentType == "" {
			continue
		}
		fmt.Fprintf(&b, "--%s\nContent-Type: %s\n\n%s\n", mimeBoundary, p.contentType, strings.TrimRight(p.body, "\n"))
	}
	fmt.Fprintf(&b, "--%s--\n", mimeBoundary)
	return b.Bytes()
}
