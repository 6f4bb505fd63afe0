package inventory

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/smithy-go"

	"github.com/nodejoin/nodejoin/internal/authn"
	"github.com/nodejoin/nodejoin/internal/csr"
)

// DefaultCacheTTL is how long EC2 reuses an answer. It is short on purpose: a cached
// "running" outlives the instance's termination by up to this long, and for that long
// the terminated instance's credentials still authenticate and its CSRs still pass.
const DefaultCacheTTL = 30 * time.Second

// maxCacheEntries bounds each of EC2's caches; the oldest entry makes room.
const maxCacheEntries = 4096

// maxPages bounds the DescribeInstances pages read for one lookup.
const maxPages = 20

// ErrAmbiguousNode reports a node name that more than one instance answers to.
var ErrAmbiguousNode = errors.New("more than one instance has the node's private DNS name")

// EC2Options configure an EC2 inventory.
type EC2Options struct {
	// EC2Endpoint and IAMEndpoint are the services' base URLs; empty for AWS's own.
	EC2Endpoint, IAMEndpoint string
	// CacheTTL is how long answers are reused: 0 means DefaultCacheTTL, and a negative
	// value turns caching off.
	CacheTTL time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// EC2 is the inventory of an AWS account's instances, read through EC2
// DescribeInstances and IAM GetInstanceProfile. Node names are the instances' private
// DNS names, as on EKS. Answers for running, shutting-down and terminated instances are
// cached for the TTL; errors, unknown names and instances in a state that may yet turn
// running (pending, stopping, stopped) are not, so a new node is seen at once. Safe for
// concurrent use.
type EC2 struct {
	ec2 *ec2.Client
	iam *iam.Client
	ttl time.Duration
	now func() time.Time

	nodes    *ttlCache[*csr.Instance]
	ids      *ttlCache[*authn.Instance]
	profiles *ttlCache[string] // instance profile name → role name
}

var (
	_ csr.Inventory   = (*EC2)(nil)
	_ authn.Instances = (*EC2)(nil)
)

// NewEC2 returns the inventory of the account whose credentials cfg holds, in cfg's region.
func NewEC2(cfg aws.Config, o EC2Options) *EC2 {
	e := &EC2{
		ec2: ec2.NewFromConfig(cfg, func(opts *ec2.Options) {
			if o.EC2Endpoint != "" {
				opts.BaseEndpoint = aws.String(o.EC2Endpoint)
			}
		}),
		iam: iam.NewFromConfig(cfg, func(opts *iam.Options) {
			if o.IAMEndpoint != "" {
				opts.BaseEndpoint = aws.String(o.IAMEndpoint)
			}
		}),
		ttl:      o.CacheTTL,
		now:      o.Now,
		nodes:    newTTLCache[*csr.Instance](maxCacheEntries),
		ids:      newTTLCache[*authn.Instance](maxCacheEntries),
		profiles: newTTLCache[string](maxCacheEntries),
	}
	if e.ttl == 0 {
		e.ttl = DefaultCacheTTL
	}
	if e.now == nil {
		e.now = time.Now
	}
	return e
}

// cacheable tells whether an answer about an instance in a state may be reused: the
// instance is running, or on its way out for good. An instance that may turn running
// any moment is asked about again, lest a node's first CSR be denied for a stale state.
func cacheable(state string) bool {
	return state == "running" || state == "shutting-down" || state == "terminated"
}

// filterValue escapes EC2's filter wildcards, so that a name matches only itself.
var filterValue = strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`)

// InstanceForNode implements csr.Inventory: the instance whose private DNS name is the
// node's name.
func (e *EC2) InstanceForNode(ctx context.Context, node string) (*csr.Instance, error) {
	if node == "" {
		return nil, csr.ErrUnknownNode
	}
	if inst, ok := e.nodes.get(node, e.now()); ok {
		return cloneCSRInstance(inst), nil
	}
	found, err := e.describe(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("private-dns-name"), Values: []string{filterValue.Replace(node)}},
	}})
	if err != nil {
		return nil, fmt.Errorf("describing the instance of node %s: %w", node, err)
	}
	// EC2 matched the name; check it here too, whatever the endpoint.
	found = slices.DeleteFunc(found, func(i ec2types.Instance) bool {
		return !strings.EqualFold(aws.ToString(i.PrivateDnsName), node)
	})
	switch len(found) {
	case 0:
		return nil, csr.ErrUnknownNode
	case 1:
	default:
		ids := make([]string, len(found))
		for i, inst := range found {
			ids[i] = aws.ToString(inst.InstanceId)
		}
		return nil, fmt.Errorf("%w: node %s: instances %s", ErrAmbiguousNode, node, strings.Join(ids, ", "))
	}
	inst := csrInstance(&found[0])
	if cacheable(inst.State) {
		e.nodes.put(node, inst, e.now(), e.ttl)
	}
	return cloneCSRInstance(inst), nil
}

// Instance implements authn.Instances: the instance, with the role of its instance profile.
func (e *EC2) Instance(ctx context.Context, id string) (*authn.Instance, error) {
	if cached, ok := e.ids.get(id, e.now()); ok {
		c := *cached
		return &c, nil
	}
	found, err := e.describe(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	var api smithy.APIError
	if errors.As(err, &api) && (api.ErrorCode() == "InvalidInstanceID.NotFound" || api.ErrorCode() == "InvalidInstanceID.Malformed") {
		return nil, authn.ErrNoInstance
	}
	if err != nil {
		return nil, fmt.Errorf("describing instance %s: %w", id, err)
	}
	i := slices.IndexFunc(found, func(i ec2types.Instance) bool { return aws.ToString(i.InstanceId) == id })
	if i < 0 {
		return nil, authn.ErrNoInstance
	}
	raw := &found[i]
	inst := &authn.Instance{ID: id, PrivateDNSName: strings.ToLower(aws.ToString(raw.PrivateDnsName))}
	if raw.State != nil {
		inst.State = string(raw.State.Name)
	}
	if raw.IamInstanceProfile != nil {
		if inst.Role, err = e.role(ctx, aws.ToString(raw.IamInstanceProfile.Arn)); err != nil {
			return nil, fmt.Errorf("instance %s: %w", id, err)
		}
	}
	if cacheable(inst.State) {
		e.ids.put(id, inst, e.now(), e.ttl)
	}
	c := *inst
	return &c, nil
}

// role returns the role of an instance profile, "" when it has none or is gone.
func (e *EC2) role(ctx context.Context, profileARN string) (string, error) {
	if profileARN == "" {
		return "", nil
	}
	name := profileARN[strings.LastIndex(profileARN, "/")+1:]
	if name == "" || !strings.Contains(profileARN, ":instance-profile/") {
		return "", fmt.Errorf("instance profile ARN %q names no instance profile", profileARN)
	}
	if role, ok := e.profiles.get(name, e.now()); ok {
		return role, nil
	}
	out, err := e.iam.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	var gone *iamtypes.NoSuchEntityException
	if errors.As(err, &gone) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("getting instance profile %s: %w", name, err)
	}
	role := ""
	if out.InstanceProfile != nil && len(out.InstanceProfile.Roles) > 0 {
		role = aws.ToString(out.InstanceProfile.Roles[0].RoleName)
	}
	e.profiles.put(name, role, e.now(), e.ttl)
	return role, nil
}

// describe returns the instances DescribeInstances finds, over all its pages.
func (e *EC2) describe(ctx context.Context, in *ec2.DescribeInstancesInput) ([]ec2types.Instance, error) {
	var out []ec2types.Instance
	p := ec2.NewDescribeInstancesPaginator(e.ec2, in)
	for pages := 0; p.HasMorePages(); pages++ {
		if pages == maxPages {
			return nil, fmt.Errorf("DescribeInstances returned more than %d pages", maxPages)
		}
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, r := range page.Reservations {
			out = append(out, r.Instances...)
		}
	}
	return out, nil
}

// csrInstance is what the CSR policy checks of an instance: its private and public DNS
// names, and every address of its network interfaces.
func csrInstance(raw *ec2types.Instance) *csr.Instance {
	inst := &csr.Instance{ID: aws.ToString(raw.InstanceId)}
	if raw.State != nil {
		inst.State = string(raw.State.Name)
	}
	for _, n := range []*string{raw.PrivateDnsName, raw.PublicDnsName} {
		if name := strings.ToLower(aws.ToString(n)); name != "" && !slices.Contains(inst.DNSNames, name) {
			inst.DNSNames = append(inst.DNSNames, name)
		}
	}
	addrs := []*string{raw.PrivateIpAddress, raw.PublicIpAddress, raw.Ipv6Address}
	for _, nic := range raw.NetworkInterfaces {
		addrs = append(addrs, nic.PrivateIpAddress)
		if nic.Association != nil {
			addrs = append(addrs, nic.Association.PublicIp)
		}
		for _, a := range nic.PrivateIpAddresses {
			addrs = append(addrs, a.PrivateIpAddress)
			if a.Association != nil {
				addrs = append(addrs, a.Association.PublicIp)
			}
		}
		for _, a := range nic.Ipv6Addresses {
			addrs = append(addrs, a.Ipv6Address)
		}
	}
	for _, s := range addrs {
		if a, err := netip.ParseAddr(aws.ToString(s)); err == nil && !slices.Contains(inst.IPs, a.Unmap()) {
			inst.IPs = append(inst.IPs, a.Unmap())
		}
	}
	return inst
}

func cloneCSRInstance(i *csr.Instance) *csr.Instance {
	c := *i
	c.DNSNames = slices.Clone(i.DNSNames)
	c.IPs = slices.Clone(i.IPs)
	return &c
}

// ttlCache keeps values for a while, at most max of them.
type ttlCache[V any] struct {
	max int

	mu      sync.Mutex
	entries map[string]cacheEntry[V]
}

type cacheEntry[V any] struct {
	value           V
	stored, expires time.Time
}

func newTTLCache[V any](maxEntries int) *ttlCache[V] {
	return &ttlCache[V]{max: maxEntries, entries: map[string]cacheEntry[V]{}}
}

func (c *ttlCache[V]) get(key string, now time.Time) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || !now.Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.value, true
}

// put stores a value for ttl (not at all when ttl is not positive), first dropping
// expired entries and then the oldest ones when the cache is full.
func (c *ttlCache[V]) put(key string, v V, now time.Time, ttl time.Duration) {
	if ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[key]; !ok && len(c.entries) >= c.max {
		for k, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, k)
			}
		}
		for len(c.entries) >= c.max {
			oldest, first := "", true
			for k, e := range c.entries {
				if first || e.stored.Before(c.entries[oldest].stored) {
					oldest, first = k, false
				}
			}
			delete(c.entries, oldest)
		}
	}
	c.entries[key] = cacheEntry[V]{value: v, stored: now, expires: now.Add(ttl)}
}
