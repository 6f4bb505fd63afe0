package cloud

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"os"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodejoin/nodejoin/internal/netagent/ipamd/pool"
)

// SDK is EC2 over aws-sdk-go-v2's client.
type SDK struct{ Client *ec2.Client }

// int32Of clamps a count into the API's int32.
func int32Of(n int) int32 {
	return int32(max(min(n, math.MaxInt32), math.MinInt32))
}

// InstanceTypeLimits calls DescribeInstanceTypes.
func (s SDK) InstanceTypeLimits(ctx context.Context, instanceType string) (l pool.Limits, err error) {
	out, err := s.Client.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{types.InstanceType(instanceType)}})
	if err != nil {
		return pool.Limits{}, fmt.Errorf("describing instance type %s: %w", instanceType, err)
	}
	for _, it := range out.InstanceTypes {
		if string(it.InstanceType) != instanceType || it.NetworkInfo == nil {
			continue
		}
		ni := it.NetworkInfo
		l.ENIs = int(aws.ToInt32(ni.MaximumNetworkInterfaces))
		// The default network card's own limit, where the type has several cards.
		def := aws.ToInt32(ni.DefaultNetworkCardIndex)
		for _, nc := range ni.NetworkCards {
			if aws.ToInt32(nc.NetworkCardIndex) == def && nc.MaximumNetworkInterfaces != nil {
				l.ENIs = int(*nc.MaximumNetworkInterfaces)
			}
		}
		l.IPv4PerENI = int(aws.ToInt32(ni.Ipv4AddressesPerInterface))
		if l.ENIs < 1 || l.IPv4PerENI < 2 {
			return pool.Limits{}, fmt.Errorf("instance type %s: EC2 reports %d ENIs of %d IPv4 addresses, too few for pods", instanceType, l.ENIs, l.IPv4PerENI)
		}
		return l, nil
	}
	return pool.Limits{}, fmt.Errorf("describing instance type %s: EC2 does not know it", instanceType)
}

// InstanceENIs calls DescribeNetworkInterfaces(attachment.instance-id), all pages.
func (s SDK) InstanceENIs(ctx context.Context, instanceID string) ([]ENI, error) {
	return s.describe(ctx, fmt.Sprintf("ENIs of instance %s", instanceID), &ec2.DescribeNetworkInterfacesInput{
		Filters: []types.Filter{{Name: aws.String("attachment.instance-id"), Values: []string{instanceID}}},
	})
}

// LeakedENIs calls DescribeNetworkInterfaces for available ENIs tagged with the instance.
func (s SDK) LeakedENIs(ctx context.Context, instanceID string) ([]ENI, error) {
	return s.describe(ctx, fmt.Sprintf("unattached ENIs created for instance %s", instanceID), &ec2.DescribeNetworkInterfacesInput{
		Filters: []types.Filter{
			{Name: aws.String("tag:" + TagInstanceID), Values: []string{instanceID}},
			{Name: aws.String("status"), Values: []string{"available"}},
		},
	})
}

// DescribeENI calls DescribeNetworkInterfaces(NetworkInterfaceId.1).
func (s SDK) DescribeENI(ctx context.Context, eniID string) (ENI, error) {
	enis, err := s.describe(ctx, "ENI "+eniID, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{eniID}})
	if err != nil {
		return ENI{}, err
	}
	for _, e := range enis {
		if e.ID == eniID {
			return e, nil
		}
	}
	return ENI{}, fmt.Errorf("describing ENI %s: EC2 returned no such ENI", eniID)
}

func (s SDK) describe(ctx context.Context, what string, in *ec2.DescribeNetworkInterfacesInput) (out []ENI, err error) {
	p := ec2.NewDescribeNetworkInterfacesPaginator(s.Client, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing %s: %w", what, err)
		}
		for _, ni := range page.NetworkInterfaces {
			out = append(out, convertENI(ni))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func convertENI(ni types.NetworkInterface) ENI {
	e := ENI{
		ID: aws.ToString(ni.NetworkInterfaceId), MAC: aws.ToString(ni.MacAddress), SubnetID: aws.ToString(ni.SubnetId),
		Description: aws.ToString(ni.Description), Status: string(ni.Status), Tags: map[string]string{},
	}
	if a := ni.Attachment; a != nil {
		e.AttachmentID, e.InstanceID, e.DeviceNumber = aws.ToString(a.AttachmentId), aws.ToString(a.InstanceId), int(aws.ToInt32(a.DeviceIndex))
	}
	if ip, err := netip.ParseAddr(aws.ToString(ni.PrivateIpAddress)); err == nil {
		e.PrimaryIP = ip
	}
	for _, p := range ni.PrivateIpAddresses {
		ip, err := netip.ParseAddr(aws.ToString(p.PrivateIpAddress))
		if err != nil {
			continue
		}
		if aws.ToBool(p.Primary) {
			e.PrimaryIP = ip
			continue
		}
		e.Secondary = append(e.Secondary, ip)
	}
	sort.Slice(e.Secondary, func(i, j int) bool { return e.Secondary[i].Less(e.Secondary[j]) })
	for _, t := range ni.TagSet {
		e.Tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return e
}

// CreateENI calls CreateNetworkInterface with a description and tags.
func (s SDK) CreateENI(ctx context.Context, in CreateENIInput) (e ENI, err error) {
	keys := make([]string, 0, len(in.Tags))
	for k := range in.Tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	tags := make([]types.Tag, 0, len(keys))
	for _, k := range keys {
		tags = append(tags, types.Tag{Key: aws.String(k), Value: aws.String(in.Tags[k])})
	}
	sgs := append([]string(nil), in.SecurityGroupIDs...)
	sort.Strings(sgs)
	req := &ec2.CreateNetworkInterfaceInput{
		SubnetId:    aws.String(in.SubnetID),
		Description: aws.String(in.Description),
		Groups:      sgs,
	}
	if in.SecondaryIPs > 0 {
		req.SecondaryPrivateIpAddressCount = aws.Int32(int32Of(in.SecondaryIPs))
	}
	if len(tags) > 0 {
		req.TagSpecifications = []types.TagSpecification{{ResourceType: types.ResourceTypeNetworkInterface, Tags: tags}}
	}
	out, err := s.Client.CreateNetworkInterface(ctx, req)
	if err != nil {
		return ENI{}, fmt.Errorf("creating an ENI in subnet %s: %w", in.SubnetID, err)
	}
	if out.NetworkInterface == nil {
		return ENI{}, fmt.Errorf("creating an ENI in subnet %s: EC2 returned no network interface", in.SubnetID)
	}
	return convertENI(*out.NetworkInterface), nil
}

// AttachENI calls AttachNetworkInterface on network card 0.
func (s SDK) AttachENI(ctx context.Context, instanceID, eniID string, deviceIndex int) (id string, err error) {
	out, err := s.Client.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{
		InstanceId: aws.String(instanceID), NetworkInterfaceId: aws.String(eniID),
		DeviceIndex: aws.Int32(int32Of(deviceIndex)), NetworkCardIndex: aws.Int32(0),
	})
	if err != nil {
		return "", fmt.Errorf("attaching ENI %s to %s at device index %d: %w", eniID, instanceID, deviceIndex, err)
	}
	return aws.ToString(out.AttachmentId), nil
}

// SetDeleteOnTermination calls ModifyNetworkInterfaceAttribute.
func (s SDK) SetDeleteOnTermination(ctx context.Context, eniID, attachmentID string) (err error) {
	_, err = s.Client.ModifyNetworkInterfaceAttribute(ctx, &ec2.ModifyNetworkInterfaceAttributeInput{
		NetworkInterfaceId: aws.String(eniID),
		Attachment:         &types.NetworkInterfaceAttachmentChanges{AttachmentId: aws.String(attachmentID), DeleteOnTermination: aws.Bool(true)},
	})
	if err != nil {
		return fmt.Errorf("setting delete-on-termination on ENI %s: %w", eniID, err)
	}
	return nil
}

// AssignIPs calls AssignPrivateIpAddresses(SecondaryPrivateIpAddressCount).
func (s SDK) AssignIPs(ctx context.Context, eniID string, n int) (ips []netip.Addr, err error) {
	out, err := s.Client.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(eniID), SecondaryPrivateIpAddressCount: aws.Int32(int32Of(n)),
	})
	if err != nil {
		return nil, fmt.Errorf("assigning %d addresses to ENI %s: %w", n, eniID, err)
	}
	for _, a := range out.AssignedPrivateIpAddresses {
		ip, perr := netip.ParseAddr(aws.ToString(a.PrivateIpAddress))
		if perr != nil {
			return nil, fmt.Errorf("assigning %d addresses to ENI %s: EC2 returned %q: %w", n, eniID, aws.ToString(a.PrivateIpAddress), perr)
		}
		ips = append(ips, ip)
	}
	return ips, nil
}

// UnassignIPs calls UnassignPrivateIpAddresses(PrivateIpAddress.N).
func (s SDK) UnassignIPs(ctx context.Context, eniID string, ips []netip.Addr) (err error) {
	strs := make([]string, len(ips))
	for i, ip := range ips {
		strs[i] = ip.String()
	}
	_, err = s.Client.UnassignPrivateIpAddresses(ctx, &ec2.UnassignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(eniID), PrivateIpAddresses: strs})
	if err != nil {
		return fmt.Errorf("unassigning %v from ENI %s: %w", strs, eniID, err)
	}
	return nil
}

// DetachENI calls DetachNetworkInterface.
func (s SDK) DetachENI(ctx context.Context, attachmentID string) (err error) {
	if _, err = s.Client.DetachNetworkInterface(ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: aws.String(attachmentID)}); err != nil {
		return fmt.Errorf("detaching %s: %w", attachmentID, err)
	}
	return nil
}

// DeleteENI calls DeleteNetworkInterface.
func (s SDK) DeleteENI(ctx context.Context, eniID string) (err error) {
	if _, err = s.Client.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(eniID)}); err != nil {
		return fmt.Errorf("deleting ENI %s: %w", eniID, err)
	}
	return nil
}

// NewSDK builds the EC2 client as ipamd runs it: the SDK's default configuration chain
// (credentials from the environment, shared files or the instance role; the endpoint
// from AWS_ENDPOINT_URL_EC2 when set), in region unless AWS_REGION or
// AWS_DEFAULT_REGION names another.
func NewSDK(ctx context.Context, region string) (SDK, error) {
	var opts []func(*config.LoadOptions) error
	if os.Getenv("AWS_REGION") == "" && os.Getenv("AWS_DEFAULT_REGION") == "" {
		opts = append(opts, config.WithRegion(region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return SDK{}, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	return SDK{Client: ec2.NewFromConfig(cfg)}, nil
}
