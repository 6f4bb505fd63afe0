package localcloud

// This file holds the VPC's DHCP options: a custom domain-name, which names instances in
// their instance metadata (local-hostname, hostname) and on their hosts, while EC2 keeps
// naming them ip-A-B-C-D.REGION.compute.internal (PrivateDnsName). A kubelet named from
// local-hostname then differs from the node name the control plane expects, the defect
// amazon-eks-ami PR #1264 fixed by naming the node from EC2.

import (
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ValidateDHCPDomainName checks a DHCP options domain-name: one DNS domain (RFC 1123
// subdomain: lower-case letters, digits, '-' and '.', at most 253 characters), such as
// corp.example. AWS also accepts several, separated by spaces; the local cloud takes one.
func ValidateDHCPDomainName(name string) error {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("DHCP options domain-name %q is not a DNS domain such as corp.example: %s", name, strings.Join(errs, "; "))
	}
	return nil
}

// SetDHCPDomainName associates a DHCP options set whose domain-name is name with the VPC;
// "" restores the default set, whose domain is EC2's own (REGION.compute.internal).
func (e *EC2) SetDHCPDomainName(vpcID, name string) error {
	if name != "" {
		if err := ValidateDHCPDomainName(name); err != nil {
			return err
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if name == "" {
		delete(e.dhcpDomains, vpcID)
	} else {
		e.dhcpDomains[vpcID] = name
	}
	return nil
}

// DHCPDomainName is the custom domain-name of the VPC's DHCP options; "" for the
// default set.
func (e *EC2) DHCPDomainName(vpcID string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.dhcpDomains[vpcID]
}

// DHCPHostname is the host name of an address in a DHCP domain, as instance metadata
// reports it: ip-A-B-C-D.DOMAIN.
func DHCPHostname(addr netip.Addr, domain string) string {
	return "ip-" + strings.ReplaceAll(addr.String(), ".", "-") + "." + domain
}
