// Package autoscaling is the local AWS's EC2 Auto Scaling: groups, their instances and
// scaling activities, and the reconcile loop that launches and terminates instances
// toward each group's desired capacity through a Launcher, balancing the availability
// zones as Auto Scaling does; actions.go serves it on the Query protocol. Of the local
// AWS it imports the wire layer (protocol) and ec2 (subnets, launch templates,
// instance states).
package autoscaling

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nodejoin/nodejoin/internal/localaws/ec2"
	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

// Launcher launches and terminates the instances of Auto Scaling groups: the seam
// between the local AWS and what runs instances (the sandbox's local instances, or a
// fake in tests). Auto Scaling calls it from its reconcile loop only.
type Launcher interface {
	// Launch starts an instance and returns its ID once EC2 shows it running. A
	// *LaunchError says how EC2 refused it.
	Launch(ctx context.Context, spec LaunchSpec) (instanceID string, err error)
	// Terminate terminates an instance Launch started.
	Terminate(ctx context.Context, instanceID string) error
}

// LaunchSpec is one instance an Auto Scaling group launches: its launch template's
// version, and where.
type LaunchSpec struct {
	GroupName string
	// Template is the concrete version launched from ($Latest and $Default resolved).
	Template     ec2.ResolvedLaunchTemplate
	ImageID      string
	InstanceType string
	// UserData is decoded (the instance's view).
	UserData []byte
	// IAMInstanceProfile is the template's instance profile, by name or ARN ("" for none).
	IAMInstanceProfile string
	// Role is the instance profile's role, as Config.Profiles resolves it ("" for none).
	Role             string
	AvailabilityZone string
	SubnetID         string
	SecurityGroupIDs []string
	// Tags are the instance's tags: the template's instance tags, the group's tags
	// that propagate at launch (which win), aws:autoscaling:groupName and the
	// aws:ec2launchtemplate:id/version tags.
	Tags map[string]string
}

// Profiles resolves an instance profile, by name or ARN, to its role: IAM.
type Profiles interface {
	InstanceProfileRole(nameOrARN string) (role string, ok bool)
}

// LaunchError is EC2's refusal of a launch, as the Auto Scaling activity reports it.
type LaunchError struct {
	Code, Message string
}

func (e *LaunchError) Error() string { return e.Code + ": " + e.Message }

// DefaultSubnets are the local VPC's subnets: one in each of the region's zones a, b
// and c, EC2's zone subnets (which DescribeSubnets lists).
func DefaultSubnets(region string) []ec2.Subnet { return ec2.ZoneSubnets(region) }

// Config configures the Auto Scaling emulator.
type Config struct {
	AccountID, Region string
	// Subnets are the subnets VPCZoneIdentifier may name; default DefaultSubnets.
	Subnets []ec2.Subnet
	// Templates resolves the groups' launch templates. Required.
	Templates *ec2.LaunchTemplates
	// Profiles, when set, resolves launch templates' instance profiles to their roles
	// (LaunchSpec.Role); a launch naming a profile it does not know fails.
	Profiles Profiles
	// EC2, when set, is the inventory whose running instances count against the
	// instance limit and whose state tells an instance's health.
	EC2 *ec2.EC2
	// RetryDelay is how long a zone whose launch failed is skipped; default 10s.
	RetryDelay time.Duration
	// Interval is how often the groups are reconciled without a change; default 2s.
	Interval time.Duration
	Log      *slog.Logger
}

// AutoScaling is the account's EC2 Auto Scaling groups and its endpoint. Run
// reconciles the groups; SetLauncher gives it the instances. Safe for concurrent use.
type AutoScaling struct {
	cfg Config
	now func() time.Time

	mu            sync.Mutex
	ctx           context.Context // Run's; nil before Run
	launcher      Launcher
	groups        map[string]*asGroup
	activities    []*activity // oldest first
	instanceLimit int
	calls         int
	kick          chan struct{}
	ops           sync.WaitGroup // launches and terminations under way
	service       *protocol.Service
}

type asGroup struct {
	name, arn string
	created   time.Time

	min, max, desired int64
	lt                *ltSpec
	mip               *mixedPolicy
	zones             []string // enabled zones, in order
	subnets           []string // VPCZoneIdentifier's subnets, in order
	healthCheckType   string
	gracePeriod       int64
	cooldown          int64
	termination       []string
	protectNew        bool
	capacityRebalance bool
	tags              []asTag

	instances map[string]*asInstance
	launching map[string]int       // zone → launches under way
	backoff   map[string]time.Time // zone → no launch before
	deleting  bool
}

// ltSpec names a launch template and version, as a group or an instance holds it.
type ltSpec struct {
	ID, Name, Version string
}

type mixedPolicy struct {
	lt        ltSpec
	overrides []ltOverride
	dist      instancesDistribution
}

type ltOverride struct {
	InstanceType, WeightedCapacity string
}

type instancesDistribution struct {
	OnDemandAllocationStrategy          string
	OnDemandBaseCapacity                *int64
	OnDemandPercentageAboveBaseCapacity *int64
	SpotAllocationStrategy              string
	SpotInstancePools                   *int64
	SpotMaxPrice                        *string
}

type asTag struct {
	Key, Value string
	Propagate  bool
}

type asInstance struct {
	id, zone, subnet string
	instanceType     string
	lt               ltSpec // concrete version
	state            string // Pending, InService, Terminating
	health           string // Healthy, Unhealthy
	launched         time.Time
	protected        bool
}

type activity struct {
	id, group, groupARN string
	description, cause  string
	details             string
	start, end          time.Time
	status, message     string
	progress            int
	groupDeleted        bool
}

// New returns the Auto Scaling service of an account, without groups.
func New(cfg Config) *AutoScaling {
	if cfg.Subnets == nil {
		cfg.Subnets = DefaultSubnets(cfg.Region)
	}
	if cfg.RetryDelay == 0 {
		cfg.RetryDelay = 10 * time.Second
	}
	if cfg.Interval == 0 {
		cfg.Interval = 2 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	a := &AutoScaling{cfg: cfg, now: time.Now, groups: map[string]*asGroup{}, kick: make(chan struct{}, 1)}
	a.service = a.newService()
	return a
}

// SetLauncher sets what launches the groups' instances. Until it is set, launches fail.
func (a *AutoScaling) SetLauncher(l Launcher) {
	a.mu.Lock()
	a.launcher = l
	a.mu.Unlock()
	a.wake()
}

// SetInstanceLimit caps the account's running instances (0: no cap). A launch beyond it
// fails with InstanceLimitExceeded, as EC2's vCPU-based limit does.
func (a *AutoScaling) SetInstanceLimit(n int) {
	a.mu.Lock()
	a.instanceLimit = n
	a.mu.Unlock()
	a.wake()
}

// Subnets are the subnets groups may use.
func (a *AutoScaling) Subnets() []ec2.Subnet { return slices.Clone(a.cfg.Subnets) }

// Calls counts the authenticated requests received.
func (a *AutoScaling) Calls() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls
}

// wake makes Run reconcile now.
func (a *AutoScaling) wake() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// Run reconciles the groups until ctx ends, then waits for the launches and
// terminations under way.
func (a *AutoScaling) Run(ctx context.Context) {
	a.mu.Lock()
	a.ctx = ctx
	a.mu.Unlock()
	t := time.NewTicker(a.cfg.Interval)
	defer t.Stop()
	for {
		a.reconcile(ctx)
		select {
		case <-ctx.Done():
			a.ops.Wait()
			return
		case <-a.kick:
		case <-t.C:
		}
	}
}

func (a *AutoScaling) zoneOf(subnet string) (string, bool) {
	for _, s := range a.cfg.Subnets {
		if s.ID == subnet {
			return s.AvailabilityZone, true
		}
	}
	return "", false
}

// addActivity records an activity of g; a.mu is held.
func (a *AutoScaling) addActivity(g *asGroup, description, cause, details string) *activity {
	act := &activity{id: protocol.NewRequestID(), group: g.name, groupARN: g.arn, description: description, cause: cause,
		details: details, start: a.now().UTC(), status: "InProgress", progress: 0}
	a.activities = append(a.activities, act)
	return act
}

func (act *activity) finish(now time.Time, err string) {
	act.end, act.progress = now.UTC(), 100
	if err == "" {
		act.status = "Successful"
		return
	}
	act.status, act.message = "Failed", err
}
