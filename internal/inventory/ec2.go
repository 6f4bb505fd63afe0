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
	"golang.org/x/sync/singleflight"
	"k8s.io/apimachinery/pkg/util/cache"
)

// DefaultCacheTTL is how long EC2 reuses an answer. It is short on purpose: a cached
// "running" outlives the instance's termination by up to this long, and for that long
// the terminated instance's credentials still authenticate and its CSRs still pass.
const DefaultCacheTTL = 30 * time.Second

// DefaultNegativeCacheTTL is how long EC2 reuses a "not found": long enough to absorb a
// burst of lookups of a name that is not (yet) an instance, short enough that a new
// instance is seen within a few seconds.
const DefaultNegativeCacheTTL = 5 * time.Second

// maxCacheEntries bounds EC2's cache; the least recently used entry makes room.
const maxCacheEntries = 8192

// maxPages bounds the DescribeInstances pages read for one lookup.
const maxPages = 20

// ErrAmbiguousNode reports a node name that more than one instance answers to.
var ErrAmbiguousNode = errors.New("more than one instance has the node's private DNS name")

// EC2Options configure an EC2 inventory.
type EC2Options struct {
	// EC2Endpoint and IAMEndpoint are the services' base URLs; empty for AWS's own.
	EC2Endpoint, IAMEndpoint string
	// CacheTTL is how long answers are reused: 0 means DefaultCacheTTL, and a negative
	// value turns caching off, of "not found" answers too.
	CacheTTL time.Duration
	// NegativeCacheTTL is how long a "not found" is reused: 0 means
	// DefaultNegativeCacheTTL, and a negative value turns that off.
	NegativeCacheTTL time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// BatchWindow is how long a lookup by node name waits for others to share its
	// DescribeInstances call (one call names up to maxBatch nodes): 0 means
	// DefaultBatchWindow, a negative value one call per node.
	BatchWindow time.Duration
}

// DefaultBatchWindow is EC2Options.BatchWindow's default: short against a CSR's
// settling, long enough that the nodes of a burst share calls.
const DefaultBatchWindow = 10 * time.Millisecond

// maxBatch is how many node names one DescribeInstances call asks for: EC2 takes up
// to 200 values in one filter.
const maxBatch = 200

// EC2 is the inventory of an AWS account's instances, read through EC2
// DescribeInstances and IAM GetInstanceProfile. Node names are the instances' private
// DNS names, as on EKS.
//
// One cache, least recently used first out, holds instances by node name and by ID and
// instance profiles' roles. Answers for running, shutting-down and terminated instances
// are kept for the TTL; "not found" for the shorter negative TTL; errors and instances
// in a state that may yet turn running (pending, stopping, stopped) not at all, so a new
// node is seen at once. Concurrent lookups of one key share one cloud call. Safe for
// concurrent use.
type EC2 struct {
	ec2         *ec2.Client
	iam         *iam.Client
	ttl         time.Duration
	negativeTTL time.Duration
	now         func() time.Time

	cache  *cache.LRUExpireCache // nil when caching is off
	flight singleflight.Group

	window time.Duration
	mu     sync.Mutex
	batch  *nodeBatch // gathering names; nil when none is
}

// nodeBatch is one DescribeInstances call by private DNS name for several nodes.
type nodeBatch struct {
	names []string
	once  sync.Once
	done  chan struct{}
	// found holds the instances described, by lower-case private DNS name; err the
	// call's error. Both are set before done closes.
	found map[string][]described
	err   error
}

// cacheKey is a key of EC2's cache: a node name, an instance ID or an instance profile name.
type cacheKey struct {
	kind keyKind
	name string
}

type keyKind string

const (
	byNode    keyKind = "node"
	byID      keyKind = "id"
	byProfile keyKind = "profile"
)

// notFound is the cached answer for a key that names no instance.
type notFound struct{}

// profileRole is the cached role of an instance profile.
type profileRole struct{ name, arn string }

type clockFunc func() time.Time

func (f clockFunc) Now() time.Time { return f() }

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
		ttl:         o.CacheTTL,
		negativeTTL: o.NegativeCacheTTL,
		now:         o.Now,
		window:      o.BatchWindow,
	}
	if e.window == 0 {
		e.window = DefaultBatchWindow
	}
	if e.ttl == 0 {
		e.ttl = DefaultCacheTTL
	}
	if e.negativeTTL == 0 {
		e.negativeTTL = DefaultNegativeCacheTTL
	}
	if e.now == nil {
		e.now = time.Now
	}
	if e.ttl > 0 {
		e.cache = cache.NewLRUExpireCacheWithClock(maxCacheEntries, clockFunc(e.now))
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

// InstanceForNode returns the instance whose private DNS name is the node's name, or
// ErrNotFound.
func (e *EC2) InstanceForNode(ctx context.Context, node string) (*Instance, error) {
	if node == "" {
		return nil, ErrNotFound
	}
	return e.lookup(ctx, cacheKey{byNode, node}, func(ctx context.Context) (*Instance, error) {
		found, err := e.describeNode(ctx, node)
		if err != nil {
			return nil, fmt.Errorf("describing the instance of node %s: %w", node, err)
		}
		// EC2 matched the name; check it here too, whatever the endpoint.
		found = slices.DeleteFunc(found, func(i described) bool {
			return !strings.EqualFold(aws.ToString(i.PrivateDnsName), node)
		})
		switch len(found) {
		case 0:
			return nil, ErrNotFound
		case 1:
		default:
			ids := make([]string, len(found))
			for i, inst := range found {
				ids[i] = aws.ToString(inst.InstanceId)
			}
			return nil, fmt.Errorf("%w: node %s: instances %s", ErrAmbiguousNode, node, strings.Join(ids, ", "))
		}
		inst, err := e.instance(ctx, &found[0])
		if err != nil {
			return nil, err
		}
		// The instance is known by its ID now too.
		if cacheable(inst.State) {
			e.store(cacheKey{byID, inst.ID}, inst, e.ttl)
		}
		return inst, nil
	})
}

// describeNode returns the instances whose private DNS name may be the node's (the
// caller checks the name again). Lookups within the batch window share one
// DescribeInstances call that filters on all their names: a burst of joining nodes
// costs the cloud one call per batch, not one per node.
func (e *EC2) describeNode(ctx context.Context, node string) ([]described, error) {
	if e.window < 0 {
		return e.describe(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
			{Name: aws.String("private-dns-name"), Values: []string{filterValue.Replace(node)}},
		}})
	}
	e.mu.Lock()
	b := e.batch
	if b == nil {
		b = &nodeBatch{done: make(chan struct{})}
		e.batch = b
		time.AfterFunc(e.window, func() { e.runBatch(b) })
	}
	b.names = append(b.names, node)
	full := len(b.names) == maxBatch
	if full {
		e.batch = nil
	}
	e.mu.Unlock()
	if full {
		go e.runBatch(b)
	}
	select {
	case <-b.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if b.err != nil {
		return nil, b.err
	}
	return b.found[strings.ToLower(node)], nil
}

// runBatch makes a batch's call, once: on its timer, or as soon as it is full.
func (e *EC2) runBatch(b *nodeBatch) {
	e.mu.Lock()
	if e.batch == b {
		e.batch = nil
	}
	e.mu.Unlock()
	b.once.Do(func() { e.describeBatch(b) })
}

// describeBatch makes a batch's DescribeInstances call and closes its done.
func (e *EC2) describeBatch(b *nodeBatch) {
	values := make([]string, 0, len(b.names))
	for _, n := range b.names {
		if v := filterValue.Replace(n); !slices.Contains(values, v) {
			values = append(values, v)
		}
	}
	// The call serves many callers: none of their contexts bounds it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	found, err := e.describe(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("private-dns-name"), Values: values},
	}})
	b.found = map[string][]described{}
	for _, d := range found {
		name := strings.ToLower(aws.ToString(d.PrivateDnsName))
		b.found[name] = append(b.found[name], d)
	}
	b.err = err
	close(b.done)
}

// Instance returns the instance with an ID, or ErrNotFound.
func (e *EC2) Instance(ctx context.Context, id string) (*Instance, error) {
	return e.lookup(ctx, cacheKey{byID, id}, func(ctx context.Context) (*Instance, error) {
		found, err := e.describe(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
		var api smithy.APIError
		if errors.As(err, &api) && (api.ErrorCode() == "InvalidInstanceID.NotFound" || api.ErrorCode() == "InvalidInstanceID.Malformed") {
			return nil, ErrNotFound
		}
		if err != nil {
			return nil, fmt.Errorf("describing instance %s: %w", id, err)
		}
		i := slices.IndexFunc(found, func(i described) bool { return aws.ToString(i.InstanceId) == id })
		if i < 0 {
			return nil, ErrNotFound
		}
		return e.instance(ctx, &found[i])
	})
}

// lookup answers a key from the cache, or else from fetch, which one caller at a time
// runs for a key while the others wait for its answer. The answer is cached when it is
// ErrNotFound or an instance in a settled state.
func (e *EC2) lookup(ctx context.Context, key cacheKey, fetch func(context.Context) (*Instance, error)) (*Instance, error) {
	if v, ok := e.cached(key); ok {
		return answer(v)
	}
	ch := e.flight.DoChan(string(key.kind)+"/"+key.name, func() (any, error) {
		inst, err := fetch(ctx)
		switch {
		case errors.Is(err, ErrNotFound):
			e.store(key, notFound{}, e.negativeTTL)
		case err == nil && cacheable(inst.State):
			e.store(key, inst, e.ttl)
		}
		return inst, err
	})
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case r := <-ch:
		if r.Err != nil {
			if ctx.Err() == nil && (errors.Is(r.Err, context.Canceled) || errors.Is(r.Err, context.DeadlineExceeded)) {
				// The caller whose call this shared gave up; this one has not.
				return e.lookup(ctx, key, fetch)
			}
			return nil, r.Err
		}
		return r.Val.(*Instance).Clone(), nil
	}
}

// answer turns a cached value into a lookup's answer.
func answer(v any) (*Instance, error) {
	if inst, ok := v.(*Instance); ok {
		return inst.Clone(), nil
	}
	return nil, ErrNotFound
}

func (e *EC2) cached(key cacheKey) (any, bool) {
	if e.cache == nil {
		return nil, false
	}
	return e.cache.Get(key)
}

// store caches v for ttl. LRUExpireCache still answers at the instant an entry expires;
// an answer here is reused only while it is younger than its TTL.
func (e *EC2) store(key cacheKey, v any, ttl time.Duration) {
	if e.cache != nil && ttl > 0 {
		e.cache.Add(key, v, ttl-time.Nanosecond)
	}
}

// described is an instance as DescribeInstances returns it, with its reservation's owner.
type described struct {
	ec2types.Instance
	owner string
}

// describe returns the instances DescribeInstances finds, over all its pages.
func (e *EC2) describe(ctx context.Context, in *ec2.DescribeInstancesInput) ([]described, error) {
	var out []described
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
			for _, i := range r.Instances {
				out = append(out, described{Instance: i, owner: aws.ToString(r.OwnerId)})
			}
		}
	}
	return out, nil
}

// instance builds the model of a described instance, with the role of its instance profile.
func (e *EC2) instance(ctx context.Context, raw *described) (*Instance, error) {
	inst := &Instance{
		ID:             aws.ToString(raw.InstanceId),
		AccountID:      raw.owner,
		PrivateDNSName: strings.ToLower(aws.ToString(raw.PrivateDnsName)),
	}
	if raw.State != nil {
		inst.State = string(raw.State.Name)
	}
	for _, n := range []*string{raw.PrivateDnsName, raw.PublicDnsName} {
		if name := strings.ToLower(aws.ToString(n)); name != "" && !slices.Contains(inst.DNSNames, name) {
			inst.DNSNames = append(inst.DNSNames, name)
		}
	}
	inst.IPs = addresses(&raw.Instance)
	for _, t := range raw.Tags {
		if inst.Tags == nil {
			inst.Tags = map[string]string{}
		}
		inst.Tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	if raw.IamInstanceProfile != nil {
		role, err := e.role(ctx, aws.ToString(raw.IamInstanceProfile.Arn))
		if err != nil {
			return nil, fmt.Errorf("instance %s: %w", inst.ID, err)
		}
		inst.Role, inst.RoleARN = role.name, role.arn
	}
	return inst, nil
}

// role returns the role of an instance profile, none when it has none or is gone.
func (e *EC2) role(ctx context.Context, profileARN string) (profileRole, error) {
	if profileARN == "" {
		return profileRole{}, nil
	}
	name := profileARN[strings.LastIndex(profileARN, "/")+1:]
	if name == "" || !strings.Contains(profileARN, ":instance-profile/") {
		return profileRole{}, fmt.Errorf("instance profile ARN %q names no instance profile", profileARN)
	}
	key := cacheKey{byProfile, name}
	if v, ok := e.cached(key); ok {
		return v.(profileRole), nil
	}
	v, err, _ := e.flight.Do(string(key.kind)+"/"+key.name, func() (any, error) {
		out, err := e.iam.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
		var gone *iamtypes.NoSuchEntityException
		if errors.As(err, &gone) {
			return profileRole{}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("getting instance profile %s: %w", name, err)
		}
		var role profileRole
		if out.InstanceProfile != nil && len(out.InstanceProfile.Roles) > 0 {
			r := out.InstanceProfile.Roles[0]
			role = profileRole{name: aws.ToString(r.RoleName), arn: aws.ToString(r.Arn)}
		}
		e.store(key, role, e.ttl)
		return role, nil
	})
	if err != nil {
		return profileRole{}, err
	}
	return v.(profileRole), nil
}

// addresses are every address of an instance's network interfaces, private and public.
func addresses(raw *ec2types.Instance) []netip.Addr {
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
	var out []netip.Addr
	for _, s := range addrs {
		if a, err := netip.ParseAddr(aws.ToString(s)); err == nil && !slices.Contains(out, a.Unmap()) {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// RoleID returns the unique ID (RoleId, AROA…) IAM GetRole reports for a role ARN, to
// pin it: a role deleted and re-created under the same ARN gets a new one. Not cached.
func (e *EC2) RoleID(ctx context.Context, roleARN string) (string, error) {
	_, rest, ok := strings.Cut(roleARN, ":role/")
	name := rest[strings.LastIndex(rest, "/")+1:]
	if !ok || name == "" {
		return "", fmt.Errorf("%q is not a role ARN", roleARN)
	}
	out, err := e.iam.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(name)})
	if err != nil {
		return "", fmt.Errorf("getting role %s: %w", name, err)
	}
	if out.Role == nil || aws.ToString(out.Role.RoleId) == "" {
		return "", fmt.Errorf("getting role %s: IAM answered no role ID", name)
	}
	return aws.ToString(out.Role.RoleId), nil
}
