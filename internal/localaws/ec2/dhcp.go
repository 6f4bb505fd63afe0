package ec2

// This file holds the VPC's DHCP options: a custom domain-name, which names instances in
// their instance metadata (local-hostname, hostname) and on their hosts, while EC2 keeps
// naming them ip-A-B-C-D.REGION.compute.internal (PrivateDnsName). A kubelet named from
// local-hostname then differs from the node name the control plane expects, the defect
// amazon-eks-ami PR #1264 fixed by naming the node from EC2.

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
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

// dhcpOptions is a VPC's custom DHCP options set as DescribeDhcpOptions shows it.
type dhcpOptions struct {
	id, domain string
}

// dhcpOptionsID is the options set ID of a VPC's domain: stable for the same VPC and
// domain, as one set associated with the VPC keeps its ID.
func dhcpOptionsID(vpcID, domain string) string {
	sum := sha256.Sum256([]byte(vpcID + "\x00" + domain))
	return "dopt-" + hex.EncodeToString(sum[:])[:17]
}

// dhcpFilters are the DescribeDhcpOptions filters.
var dhcpFilters = map[string]func(o dhcpOptions, owner string) []string{
	"dhcp-options-id": func(o dhcpOptions, _ string) []string { return []string{o.id} },
	"key":             func(dhcpOptions, string) []string { return []string{"domain-name", "domain-name-servers"} },
	"value":           func(o dhcpOptions, _ string) []string { return []string{o.domain, "AmazonProvidedDNS"} },
	"owner-id":        func(_ dhcpOptions, owner string) []string { return []string{owner} },
}

type dhcpValueXML struct {
	Value string `xml:"value"`
}

type dhcpConfigurationXML struct {
	Key    string                         `xml:"key"`
	Values protocol.ItemSet[dhcpValueXML] `xml:"valueSet"`
}

type dhcpOptionsXML struct {
	DhcpOptionsID  string                                 `xml:"dhcpOptionsId"`
	OwnerID        string                                 `xml:"ownerId"`
	Configurations protocol.ItemSet[dhcpConfigurationXML] `xml:"dhcpConfigurationSet"`
	Tags           protocol.ItemSet[ec2TagXML]            `xml:"tagSet"`
}

// describeDhcpOptions lists the custom DHCP options sets of the account's VPCs (the
// ones SetDHCPDomainName associated): domain-name and domain-name-servers
// AmazonProvidedDNS. The default options set of the region is not listed.
func (e *EC2) describeDhcpOptions(r *protocol.Request) (any, *protocol.Error) {
	in, aerr := readDescribe(r.Params, "DhcpOptionsId", func(n string) bool { return dhcpFilters[n] != nil || isTagFilter(n) }, 5, 1000)
	if aerr != nil {
		return nil, aerr
	}
	if in.dry {
		return nil, errDryRun
	}
	e.mu.Lock()
	sets := map[string]dhcpOptions{}
	for vpc, domain := range e.dhcpDomains {
		o := dhcpOptions{id: dhcpOptionsID(vpc, domain), domain: domain}
		sets[o.id] = o
	}
	e.mu.Unlock()
	page, next, aerr := setOf(sets, func(o dhcpOptions, name string) []string { return dhcpFilters[name](o, e.AccountID) },
		"InvalidDhcpOptionID.NotFound", "The dhcpOption ID '%s' does not exist").page(in)
	if aerr != nil {
		return nil, aerr
	}
	var out []dhcpOptionsXML
	for _, o := range page {
		x := dhcpOptionsXML{DhcpOptionsID: o.id, OwnerID: e.AccountID}
		for _, kv := range [][2]string{{"domain-name", o.domain}, {"domain-name-servers", "AmazonProvidedDNS"}} {
			x.Configurations.Items = append(x.Configurations.Items, dhcpConfigurationXML{Key: kv[0], Values: protocol.ItemSet[dhcpValueXML]{Items: []dhcpValueXML{{kv[1]}}}})
		}
		out = append(out, x)
	}
	return newDescribeOutput(r, "dhcpOptionsSet", out, next), nil
}
