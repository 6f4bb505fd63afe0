package inventory

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go"

	"github.com/nodejoin/nodejoin/internal/localaws"
	"github.com/nodejoin/nodejoin/internal/testenv"
)

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type cloud struct {
	ec2   *localaws.EC2
	iam   *localaws.IAM
	clock *fakeClock
	inv   *EC2
	// newInventory returns another inventory of the cloud, with other options.
	newInventory func(EC2Options) *EC2

	mu               sync.Mutex
	arrived, release chan struct{} // see hold
}

// hold makes every EC2 request report on arrived and wait until release is closed.
func (c *cloud) hold(arrived, release chan struct{}) {
	c.mu.Lock()
	c.arrived, c.release = arrived, release
	c.mu.Unlock()
}

func (c *cloud) serveEC2(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	arrived, release := c.arrived, c.release
	c.mu.Unlock()
	if arrived != nil {
		select {
		case arrived <- struct{}{}:
		default:
		}
		<-release
	}
	c.ec2.ServeHTTP(w, r)
}

const account = "111122223333"

func instanceID(n int) string { return fmt.Sprintf("i-%017x", n) }

func nodeName(n int) string { return fmt.Sprintf("ip-198-18-0-%d.us-west-2.compute.internal", n) }

// newCloud serves EC2 and IAM emulators (iamHandler wraps IAM's, when not nil) and
// returns an inventory reading them through the SDK with one attempt per call.
func newCloud(t *testing.T, ttl time.Duration, iamHandler func(http.Handler) http.Handler) *cloud {
	t.Helper()
	c := &cloud{ec2: localaws.NewEC2(account), clock: &fakeClock{now: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}}
	c.iam = localaws.NewIAM(account, c.ec2)
	var ih http.Handler = c.iam
	if iamHandler != nil {
		ih = iamHandler(ih)
	}
	ec2Srv, iamSrv := httptest.NewServer(http.HandlerFunc(c.serveEC2)), httptest.NewServer(ih)
	t.Cleanup(ec2Srv.Close)
	t.Cleanup(iamSrv.Close)
	cfg := aws.Config{
		Region:           "us-west-2",
		Credentials:      credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "example-secret", ""),
		RetryMaxAttempts: 1,
		HTTPClient:       testenv.InMemoryBodies{Client: awshttp.NewBuildableClient()},
	}
	c.newInventory = func(o EC2Options) *EC2 {
		o.EC2Endpoint, o.IAMEndpoint, o.Now = ec2Srv.URL, iamSrv.URL, c.clock.Now
		return NewEC2(cfg, o)
	}
	c.inv = c.newInventory(EC2Options{CacheTTL: ttl})
	return c
}

func (c *cloud) launch(t *testing.T, n int, role string) {
	t.Helper()
	inst := localaws.Instance{ID: instanceID(n), AvailabilityZone: "us-west-2a", PrivateIPv4: fmt.Sprintf("198.18.0.%d", n), Role: role}
	if err := c.ec2.Launch(inst); err != nil {
		t.Fatal(err)
	}
}

func (c *cloud) setState(t *testing.T, n int, state string) {
	t.Helper()
	if err := c.ec2.SetState(instanceID(n), state); err != nil {
		t.Fatal(err)
	}
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func TestEC2InstanceForNode(t *testing.T) {
	c := newCloud(t, 0, nil)
	inst := localaws.Instance{ID: instanceID(1), AvailabilityZone: "us-west-2a", PrivateIPv4: "198.18.0.1", Role: "nodes", IPv6: []string{"2001:db8::1"}}
	if err := c.ec2.Launch(inst, localaws.WithPublicIPv4("203.0.113.1"), localaws.WithSecondaryPrivateIPv4s("198.18.0.201")); err != nil {
		t.Fatal(err)
	}
	c.launch(t, 2, "nodes")
	got, err := c.inv.InstanceForNode(t.Context(), nodeName(1))
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != instanceID(1) || got.State != "running" {
		t.Errorf("instance = %+v", got)
	}
	if want := []string{nodeName(1), "ec2-203-0-113-1.us-west-2.compute.amazonaws.com"}; !slices.Equal(got.DNSNames, want) {
		t.Errorf("DNS names = %q, want %q", got.DNSNames, want)
	}
	if want := addrs("198.18.0.1", "203.0.113.1", "198.18.0.201", "2001:db8::1"); !slices.Equal(got.IPs, want) {
		t.Errorf("IPs = %v, want %v", got.IPs, want)
	}
	other, err := c.inv.InstanceForNode(t.Context(), nodeName(2))
	if err != nil || other.ID != instanceID(2) || !slices.Equal(other.DNSNames, []string{nodeName(2)}) || !slices.Equal(other.IPs, addrs("198.18.0.2")) {
		t.Errorf("second node: %+v, %v", other, err)
	}

	for _, unknown := range []string{nodeName(9), "", "ip-198-18-0-*", `ip-198-18-0-1.us-west-2.compute.internal\`} {
		if _, err := c.inv.InstanceForNode(t.Context(), unknown); !errors.Is(err, ErrNotFound) {
			t.Errorf("node %q: %v, want ErrNotFound", unknown, err)
		}
	}
}

func TestEC2InstanceForNodeAmbiguous(t *testing.T) {
	c := newCloud(t, 0, nil)
	for n := 1; n <= 2; n++ {
		inst := localaws.Instance{ID: instanceID(n), PrivateIPv4: fmt.Sprintf("198.18.0.%d", n), PrivateDNSName: "twin.local.internal"}
		if err := c.ec2.Launch(inst); err != nil {
			t.Fatal(err)
		}
	}
	_, err := c.inv.InstanceForNode(t.Context(), "twin.local.internal")
	if !errors.Is(err, ErrAmbiguousNode) || errors.Is(err, ErrNotFound) ||
		!strings.Contains(err.Error(), instanceID(1)) || !strings.Contains(err.Error(), instanceID(2)) {
		t.Errorf("two instances with one name: %v", err)
	}
}

func TestEC2States(t *testing.T) {
	c := newCloud(t, 0, nil)
	c.launch(t, 1, "nodes")
	c.launch(t, 2, "nodes")
	c.setState(t, 1, "shutting-down")
	c.setState(t, 2, "terminated")
	got, err := c.inv.InstanceForNode(t.Context(), nodeName(1))
	if err != nil || got.State != "shutting-down" {
		t.Errorf("shutting-down node: %+v, %v", got, err)
	}
	// As on AWS, a terminated instance no longer has the private DNS name of its node.
	if _, err := c.inv.InstanceForNode(t.Context(), nodeName(2)); !errors.Is(err, ErrNotFound) {
		t.Errorf("terminated node: %v", err)
	}
	byID, err := c.inv.Instance(t.Context(), instanceID(2))
	if err != nil || byID.State != "terminated" || byID.ID != instanceID(2) {
		t.Errorf("terminated instance: %+v, %v", byID, err)
	}
}

func TestEC2Instance(t *testing.T) {
	c := newCloud(t, 0, nil)
	c.launch(t, 1, "nodes")
	c.launch(t, 2, "")
	got, err := c.inv.Instance(t.Context(), instanceID(1))
	if err != nil {
		t.Fatal(err)
	}
	want := Instance{ID: instanceID(1), State: "running", AccountID: account, Role: "nodes", RoleARN: "arn:aws:iam::" + account + ":role/nodes",
		PrivateDNSName: nodeName(1), DNSNames: []string{nodeName(1)}, IPs: addrs("198.18.0.1")}
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("instance = %+v, want %+v", *got, want)
	}
	noRole, err := c.inv.Instance(t.Context(), instanceID(2))
	if err != nil || noRole.Role != "" || noRole.State != "running" {
		t.Errorf("instance without a profile: %+v, %v", noRole, err)
	}
	if n := c.iam.Calls(); n != 1 {
		t.Errorf("IAM calls = %d, want 1 (none for an instance without a profile)", n)
	}
	for _, id := range []string{instanceID(9), "i-xyz", ""} {
		if _, err := c.inv.Instance(t.Context(), id); !errors.Is(err, ErrNotFound) {
			t.Errorf("instance %q: %v, want ErrNotFound", id, err)
		}
	}
}

// An instance profile that is gone, or holds no role, gives no role.
func TestEC2InstanceProfileWithoutRole(t *testing.T) {
	c := newCloud(t, 0, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := r.ParseForm(); err == nil && r.PostForm.Get("InstanceProfileName") == "gone" {
				w.WriteHeader(http.StatusNotFound)
				_, _ = io.WriteString(w, `<ErrorResponse><Error><Type>Sender</Type><Code>NoSuchEntity</Code><Message>Instance Profile gone cannot be found.</Message></Error><RequestId>1</RequestId></ErrorResponse>`)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	if err := c.iam.AddInstanceProfile("empty", ""); err != nil {
		t.Fatal(err)
	}
	c.launch(t, 1, "gone")
	c.launch(t, 2, "empty")
	for n := 1; n <= 2; n++ {
		got, err := c.inv.Instance(t.Context(), instanceID(n))
		if err != nil || got.Role != "" {
			t.Errorf("instance %d: %+v, %v", n, got, err)
		}
	}
}

func TestEC2Cache(t *testing.T) {
	c := newCloud(t, 0, nil)
	c.launch(t, 1, "nodes")
	c.launch(t, 2, "nodes")
	ctx := t.Context()
	calls := func() (int, int) { return c.ec2.Calls(), c.iam.Calls() }

	first, err := c.inv.InstanceForNode(ctx, nodeName(1))
	if err != nil {
		t.Fatal(err)
	}
	first.DNSNames[0], first.IPs[0] = "mutated", netip.MustParseAddr("192.0.2.1")
	again, err := c.inv.InstanceForNode(ctx, nodeName(1))
	if err != nil || again.DNSNames[0] != nodeName(1) || again.IPs[0] != netip.MustParseAddr("198.18.0.1") {
		t.Errorf("cached answer changed by its caller: %+v, %v", again, err)
	}
	if e, _ := calls(); e != 1 {
		t.Errorf("EC2 calls after two lookups of one node = %d, want 1", e)
	}

	for _, id := range []string{instanceID(1), instanceID(1), instanceID(2)} {
		if got, err := c.inv.Instance(ctx, id); err != nil || got.Role != "nodes" {
			t.Fatalf("instance %s: %+v, %v", id, got, err)
		}
	}
	// One DescribeInstances per instance (the node's lookup answers for its ID too), one
	// GetInstanceProfile for their profile.
	if e, i := calls(); e != 2 || i != 1 {
		t.Errorf("calls = %d EC2, %d IAM; want 2 and 1", e, i)
	}

	// The cache forgets after the TTL: a terminated instance is seen as such.
	c.setState(t, 1, "terminated")
	c.clock.Advance(DefaultCacheTTL - time.Second)
	if got, err := c.inv.Instance(ctx, instanceID(1)); err != nil || got.State != "running" {
		t.Errorf("within the TTL: %+v, %v", got, err)
	}
	c.clock.Advance(time.Second)
	if got, err := c.inv.Instance(ctx, instanceID(1)); err != nil || got.State != "terminated" {
		t.Errorf("after the TTL: %+v, %v", got, err)
	}
	if _, err := c.inv.InstanceForNode(ctx, nodeName(1)); !errors.Is(err, ErrNotFound) {
		t.Errorf("node after the TTL: %v", err)
	}
	if e, i := calls(); e != 4 || i != 2 {
		t.Errorf("calls after the TTL = %d EC2, %d IAM; want 4 and 2", e, i)
	}
}

// Errors and instances that may yet turn running are asked about again; unknown names
// once the negative TTL has passed.
func TestEC2CacheKeepsOnlySettledAnswers(t *testing.T) {
	c := newCloud(t, 0, nil)
	ctx := t.Context()
	for range 2 {
		if _, err := c.inv.InstanceForNode(ctx, nodeName(1)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown node: %v", err)
		}
	}
	c.launch(t, 1, "nodes")
	c.clock.Advance(DefaultNegativeCacheTTL)
	if got, err := c.inv.InstanceForNode(ctx, nodeName(1)); err != nil || got.ID != instanceID(1) {
		t.Errorf("node launched after a miss: %+v, %v", got, err)
	}
	c.launch(t, 2, "nodes")
	c.setState(t, 2, "pending")
	if got, err := c.inv.Instance(ctx, instanceID(2)); err != nil || got.State != "pending" {
		t.Errorf("pending: %+v, %v", got, err)
	}
	c.setState(t, 2, "running")
	if got, err := c.inv.Instance(ctx, instanceID(2)); err != nil || got.State != "running" {
		t.Errorf("running after pending: %+v, %v", got, err)
	}
	c.ec2.FailNext(1, http.StatusInternalServerError, "InternalError")
	if _, err := c.inv.InstanceForNode(ctx, nodeName(2)); err == nil {
		t.Error("injected failure not reported")
	}
	if got, err := c.inv.InstanceForNode(ctx, nodeName(2)); err != nil || got.ID != instanceID(2) {
		t.Errorf("after a failure: %+v, %v", got, err)
	}
	if n := c.ec2.Calls(); n != 6 {
		t.Errorf("EC2 calls = %d, want 6", n)
	}
}

func TestEC2CacheDisabled(t *testing.T) {
	c := newCloud(t, -1, nil)
	c.launch(t, 1, "nodes")
	for range 3 {
		if _, err := c.inv.Instance(t.Context(), instanceID(1)); err != nil {
			t.Fatal(err)
		}
	}
	if e, i := c.ec2.Calls(), c.iam.Calls(); e != 3 || i != 3 {
		t.Errorf("calls without a cache = %d EC2, %d IAM; want 3 and 3", e, i)
	}
}

// Errors other than "not found" reach the caller wrapped, so it can deny with a reason.
func TestEC2Errors(t *testing.T) {
	c := newCloud(t, 0, func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `<ErrorResponse><Error><Type>Receiver</Type><Code>ServiceFailure</Code><Message>boom</Message></Error><RequestId>1</RequestId></ErrorResponse>`)
		})
	})
	c.launch(t, 1, "nodes")
	ctx := t.Context()
	code := func(err error) string {
		var api smithy.APIError
		if errors.As(err, &api) {
			return api.ErrorCode()
		}
		return ""
	}

	c.ec2.FailNext(1, http.StatusInternalServerError, "InternalError")
	_, err := c.inv.InstanceForNode(ctx, nodeName(1))
	if code(err) != "InternalError" || errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), nodeName(1)) {
		t.Errorf("node lookup: %v", err)
	}
	c.ec2.FailNext(1, http.StatusServiceUnavailable, "RequestLimitExceeded")
	_, err = c.inv.Instance(ctx, instanceID(1))
	if code(err) != "RequestLimitExceeded" || errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "describing instance "+instanceID(1)) {
		t.Errorf("instance lookup: %v", err)
	}
	// IAM fails: the instance is not answered without its role.
	_, err = c.inv.Instance(ctx, instanceID(1))
	if code(err) != "ServiceFailure" || errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "instance profile nodes") {
		t.Errorf("role lookup: %v", err)
	}
}

func TestNewEC2Defaults(t *testing.T) {
	inv := NewEC2(aws.Config{Region: "us-west-2"}, EC2Options{})
	if inv.ttl != DefaultCacheTTL || inv.negativeTTL != DefaultNegativeCacheTTL || inv.now == nil || inv.ec2 == nil || inv.iam == nil || inv.cache == nil {
		t.Errorf("defaults: ttl %v, negative ttl %v", inv.ttl, inv.negativeTTL)
	}
	if off := NewEC2(aws.Config{Region: "us-west-2"}, EC2Options{CacheTTL: -1}); off.cache != nil {
		t.Error("a negative TTL leaves a cache")
	}
}

// Concurrent lookups of one instance make one DescribeInstances call: the first asks,
// the others wait for its answer.
func TestEC2ConcurrentLookupsShareOneCall(t *testing.T) {
	for _, tc := range []struct {
		name   string
		lookup func(*cloud, context.Context) (*Instance, error)
	}{
		{"by node", func(c *cloud, ctx context.Context) (*Instance, error) { return c.inv.InstanceForNode(ctx, nodeName(1)) }},
		{"by ID", func(c *cloud, ctx context.Context) (*Instance, error) { return c.inv.Instance(ctx, instanceID(1)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			arrived, release := make(chan struct{}, 64), make(chan struct{})
			c := newCloud(t, 0, nil)
			c.hold(arrived, release)
			c.launch(t, 1, "nodes")
			const lookups = 50
			var wg sync.WaitGroup
			errs := make(chan error, lookups)
			for range lookups {
				wg.Go(func() {
					inst, err := tc.lookup(c, t.Context())
					if err == nil && (inst.ID != instanceID(1) || inst.Role != "nodes") {
						err = fmt.Errorf("instance %+v", inst)
					}
					errs <- err
				})
			}
			<-arrived // the first DescribeInstances is held; let the others pile up behind it
			time.Sleep(50 * time.Millisecond)
			close(release)
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			if e, i := c.ec2.Calls(), c.iam.Calls(); e != 1 || i != 1 {
				t.Errorf("%d concurrent lookups made %d EC2 and %d IAM calls, want 1 and 1", lookups, e, i)
			}
		})
	}
}

// A "not found" is reused for the negative TTL, then asked again.
func TestEC2NegativeCache(t *testing.T) {
	const negative = 5 * time.Second
	c := newCloud(t, 0, nil)
	ctx := t.Context()
	for range 3 {
		if _, err := c.inv.Instance(ctx, instanceID(1)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown instance: %v", err)
		}
		if _, err := c.inv.InstanceForNode(ctx, nodeName(1)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown node: %v", err)
		}
	}
	if n := c.ec2.Calls(); n != 2 {
		t.Errorf("EC2 calls for three lookups each of an unknown ID and node = %d, want 2", n)
	}
	c.launch(t, 1, "nodes")
	c.clock.Advance(negative - time.Millisecond)
	if _, err := c.inv.Instance(ctx, instanceID(1)); !errors.Is(err, ErrNotFound) {
		t.Errorf("within the negative TTL: %v", err)
	}
	c.clock.Advance(time.Millisecond)
	if got, err := c.inv.Instance(ctx, instanceID(1)); err != nil || got.ID != instanceID(1) {
		t.Errorf("after the negative TTL: %+v, %v", got, err)
	}
	if got, err := c.inv.InstanceForNode(ctx, nodeName(1)); err != nil || got.ID != instanceID(1) {
		t.Errorf("node after the negative TTL: %+v, %v", got, err)
	}
	if n := c.ec2.Calls(); n != 4 {
		t.Errorf("EC2 calls = %d, want 4", n)
	}
}

// NegativeCacheTTL configures how long a "not found" is reused, or turns that off.
func TestEC2NegativeCacheTTLOption(t *testing.T) {
	for _, tc := range []struct {
		ttl       time.Duration
		wantCalls int
	}{{-1, 3}, {time.Minute, 1}} {
		c := newCloud(t, 0, nil)
		c.inv = c.newInventory(EC2Options{NegativeCacheTTL: tc.ttl})
		for range 3 {
			if _, err := c.inv.Instance(t.Context(), instanceID(1)); !errors.Is(err, ErrNotFound) {
				t.Fatal(err)
			}
			c.clock.Advance(10 * time.Second)
		}
		if n := c.ec2.Calls(); n != tc.wantCalls {
			t.Errorf("negative TTL %v: %d EC2 calls, want %d", tc.ttl, n, tc.wantCalls)
		}
	}
}

// Lookups of many nodes at once share DescribeInstances calls, and each gets its own
// instance (or ErrNotFound) out of the shared answer.
func TestEC2BatchesNodeLookups(t *testing.T) {
	c := newCloud(t, 0, nil)
	c.inv = c.newInventory(EC2Options{BatchWindow: time.Second}) // long: every lookup joins the first batch
	const n = 60
	for i := 1; i <= n; i++ {
		c.launch(t, i, "nodes")
	}
	var wg sync.WaitGroup
	errs := make([]error, n+2)
	ids := make([]string, n+2)
	for i := 1; i <= n+1; i++ { // node n+1 has no instance
		wg.Add(1)
		go func() {
			defer wg.Done()
			inst, err := c.inv.InstanceForNode(context.Background(), nodeName(i))
			errs[i] = err
			if err == nil {
				ids[i] = inst.ID
			}
		}()
	}
	wg.Wait()
	for i := 1; i <= n; i++ {
		if errs[i] != nil || ids[i] != instanceID(i) {
			t.Errorf("node %d: %q, %v; want %s", i, ids[i], errs[i], instanceID(i))
		}
	}
	if !errors.Is(errs[n+1], ErrNotFound) {
		t.Errorf("node without an instance: %v, want ErrNotFound", errs[n+1])
	}
	if calls := c.ec2.Calls(); calls != 1 {
		t.Errorf("EC2 calls for %d concurrent lookups = %d, want 1", n+1, calls)
	}
}
