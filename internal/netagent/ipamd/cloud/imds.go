package cloud

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
)

// IMDS reads instance metadata through aws-sdk-go-v2's IMDSv2 client.
type IMDS struct{ Client *imds.Client }

// ErrNotFound is returned for a metadata path the service does not have.
var ErrNotFound = errors.New("not in instance metadata")

func (m IMDS) get(ctx context.Context, path string) (string, error) {
	out, err := m.Client.GetMetadata(ctx, &imds.GetMetadataInput{Path: path})
	if err != nil {
		var re interface{ HTTPStatusCode() int }
		if errors.As(err, &re) && re.HTTPStatusCode() == 404 {
			return "", fmt.Errorf("reading instance metadata %s: %w", path, ErrNotFound)
		}
		return "", fmt.Errorf("reading instance metadata %s: %w", path, err)
	}
	defer func() { _ = out.Content.Close() }()
	b, err := io.ReadAll(io.LimitReader(out.Content, 1<<20))
	if err != nil {
		return "", fmt.Errorf("reading instance metadata %s: %w", path, err)
	}
	return strings.TrimSpace(string(b)), nil
}

func fields(s string) []string {
	var out []string
	for _, f := range strings.Fields(s) {
		out = append(out, strings.TrimSuffix(f, "/"))
	}
	return out
}

// Instance reads the identity document and the primary ENI's network facts.
func (m IMDS) Instance(ctx context.Context) (InstanceMetadata, error) {
	doc, err := m.Client.GetInstanceIdentityDocument(ctx, &imds.GetInstanceIdentityDocumentInput{})
	if err != nil {
		return InstanceMetadata{}, fmt.Errorf("reading the instance identity document: %w", err)
	}
	in := InstanceMetadata{ID: doc.InstanceID, Type: doc.InstanceType, Region: doc.Region, AvailabilityZone: doc.AvailabilityZone}
	if in.PrimaryMAC, err = m.get(ctx, "mac"); err != nil {
		return InstanceMetadata{}, err
	}
	nic := "network/interfaces/macs/" + in.PrimaryMAC + "/"
	ip, err := m.get(ctx, "local-ipv4")
	if err != nil {
		return InstanceMetadata{}, err
	}
	if in.PrimaryIP, err = netip.ParseAddr(ip); err != nil {
		return InstanceMetadata{}, fmt.Errorf("instance metadata local-ipv4 %q: %w", ip, err)
	}
	if in.PrimaryENIID, err = m.get(ctx, nic+"interface-id"); err != nil {
		return InstanceMetadata{}, err
	}
	if in.SubnetID, err = m.get(ctx, nic+"subnet-id"); err != nil {
		return InstanceMetadata{}, err
	}
	if in.VPCID, err = m.get(ctx, nic+"vpc-id"); err != nil && !errors.Is(err, ErrNotFound) {
		return InstanceMetadata{}, err
	}
	cidr, err := m.get(ctx, nic+"subnet-ipv4-cidr-block")
	if err != nil {
		return InstanceMetadata{}, err
	}
	if in.SubnetCIDR, err = netip.ParsePrefix(cidr); err != nil {
		return InstanceMetadata{}, fmt.Errorf("instance metadata %ssubnet-ipv4-cidr-block %q: %w", nic, cidr, err)
	}
	sgs, err := m.get(ctx, nic+"security-group-ids")
	if err != nil && !errors.Is(err, ErrNotFound) {
		return InstanceMetadata{}, err
	}
	in.SecurityGroupIDs = fields(sgs)
	sort.Strings(in.SecurityGroupIDs)
	vpc, err := m.get(ctx, nic+"vpc-ipv4-cidr-blocks")
	if err != nil {
		return InstanceMetadata{}, err
	}
	for _, f := range fields(vpc) {
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return InstanceMetadata{}, fmt.Errorf("instance metadata %svpc-ipv4-cidr-blocks entry %q: %w", nic, f, err)
		}
		in.VPCCIDRs = append(in.VPCCIDRs, p)
	}
	if len(in.VPCCIDRs) == 0 {
		return InstanceMetadata{}, fmt.Errorf("instance metadata %svpc-ipv4-cidr-blocks is empty", nic)
	}
	return in, nil
}

// ENIs lists network/interfaces/macs and reads each ENI, by device number.
func (m IMDS) ENIs(ctx context.Context) ([]MetadataENI, error) {
	primary, err := m.get(ctx, "mac")
	if err != nil {
		return nil, err
	}
	list, err := m.get(ctx, "network/interfaces/macs")
	if err != nil {
		return nil, err
	}
	var out []MetadataENI
	for _, mac := range fields(list) {
		nic := "network/interfaces/macs/" + mac + "/"
		e := MetadataENI{MAC: mac}
		if e.ID, err = m.get(ctx, nic+"interface-id"); err != nil {
			return nil, err
		}
		dn, err := m.get(ctx, nic+"device-number")
		if err != nil {
			return nil, err
		}
		if e.DeviceNumber, err = strconv.Atoi(dn); err != nil {
			return nil, fmt.Errorf("instance metadata %sdevice-number %q: %w", nic, dn, err)
		}
		if mac == primary {
			e.DeviceNumber = 0
		}
		ips, err := m.get(ctx, nic+"local-ipv4s")
		if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, err
		}
		for _, f := range fields(ips) {
			ip, err := netip.ParseAddr(f)
			if err != nil {
				return nil, fmt.Errorf("instance metadata %slocal-ipv4s entry %q: %w", nic, f, err)
			}
			e.IPs = append(e.IPs, ip)
		}
		if cidr, err := m.get(ctx, nic+"subnet-ipv4-cidr-block"); err == nil {
			if p, err := netip.ParsePrefix(cidr); err == nil {
				e.SubnetCIDR = p
			}
		} else if !errors.Is(err, ErrNotFound) {
			return nil, err
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].DeviceNumber < out[j].DeviceNumber })
	return out, nil
}
