package localaws

// This file holds EC2 Auto Scaling's model: groups, their instances and scaling
// activities, and the reconcile loop that launches and terminates instances toward each
// group's desired capacity through a Launcher, balancing the availability zones as
// Auto Scaling does. autoscaling_api.go serves it on the Query protocol.

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Launcher launches and terminates the instances of Auto Scaling groups: the sandbox's
// local instances, or a fake in tests.
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
	Template     ResolvedLaunchTemplate
	ImageID      string
	InstanceType string
	// UserData is decoded (the instance's view).
	UserData []byte
	// IAMInstanceProfile is the template's instance profile, by name or ARN ("" for none).
	IAMInstanceProfile string
	AvailabilityZone   string
	SubnetID           string
	SecurityGroupIDs   []string
	// Tags are the instance's tags: the template's instance tags, the group's tags
	// that propagate at launch (which win), aws:autoscaling:groupName and the
	// aws:ec2launchtemplate:id/version tags.
	Tags map[string]string
}

// LaunchError is EC2's refusal of a launch, as the Auto Scaling activity reports it.
type LaunchError struct {
	Code, Message string
}

func (e *LaunchError) Error() string { return e.Code + ": " + e.Message }

// DefaultSubnets are the local VPC's subnets: one in each of the region's zones a, b
// and c, with IDs derived from the zone.
func DefaultSubnets(region string) []Subnet {
	var out []Subnet
	for _, z := range []string{"a", "b", "c"} {
		sum := sha256.Sum256([]byte("subnet/" + region + z))
		out = append(out, Subnet{ID: "subnet-" + hex.EncodeToString(sum[:])[:17], AvailabilityZone: region + z})
	}
	return out
}

// AutoScalingConfig configures the Auto Scaling emulator.
type AutoScalingConfig struct {
	AccountID, Region string
	// Subnets are the subnets VPCZoneIdentifier may name; default DefaultSubnets.
	Subnets []Subnet
	// Templates resolves the groups' launch templates. Required.
	Templates *LaunchTemplates
	// EC2, when set, is the inventory whose running instances count against the
	// instance limit and whose state tells an instance's health.
	EC2 *EC2
	// RetryDelay is how long a zone whose launch failed is skipped; default 10s.
	RetryDelay time.Duration
	// Interval is how often the groups are reconciled without a change; default 2s.
	Interval time.Duration
	Log      *slog.Logger
}

// AutoScaling is the account's EC2 Auto Scaling groups and its endpoint. Run
// reconciles the groups; SetLauncher gives it the instances. Safe for concurrent use.
type AutoScaling struct {
	cfg AutoScalingConfig
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

// NewAutoScaling returns the Auto Scaling service of an account, without groups.
func NewAutoScaling(cfg AutoScalingConfig) *AutoScaling {
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
	return &AutoScaling{cfg: cfg, now: time.Now, groups: map[string]*asGroup{}, kick: make(chan struct{}, 1)}
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
func (a *AutoScaling) Subnets() []Subnet { return slices.Clone(a.cfg.Subnets) }

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

func newActivityID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// addActivity records an activity of g; a.mu is held.
func (a *AutoScaling) addActivity(g *asGroup, description, cause, details string) *activity {
	act := &activity{id: newActivityID(), group: g.name, groupARN: g.arn, description: description, cause: cause,
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

// active counts g's instances that are not terminating.
func (g *asGroup) active() (n int64, byZone map[string]int) {
	byZone = map[string]int{}
	for _, in := range g.instances {
		if in.state != "Terminating" {
			n++
			byZone[in.zone]++
		}
	}
	return n, byZone
}

func (g *asGroup) inFlight() int64 {
	var n int64
	for _, c := range g.launching {
		n += int64(c)
	}
	return n
}

// runningInstances counts the account's running instances and launches under way;
// a.mu is held.
func (a *AutoScaling) runningInstances() int {
	n := 0
	if a.cfg.EC2 != nil {
		for _, r := range a.cfg.EC2.Instances() {
			if r.State == "pending" || r.State == "running" {
				n++
			}
		}
	} else {
		for _, g := range a.groups {
			for _, in := range g.instances {
				if in.state != "Terminating" {
					n++
				}
			}
		}
	}
	for _, g := range a.groups {
		n += int(g.inFlight())
	}
	return n
}

// checkHealth marks InService instances that EC2 no longer shows running as Unhealthy;
// a.mu is held.
func (a *AutoScaling) checkHealth() {
	if a.cfg.EC2 == nil {
		return
	}
	states := map[string]string{}
	for _, r := range a.cfg.EC2.Instances() {
		states[r.ID] = r.State
	}
	for _, g := range a.groups {
		for _, in := range g.instances {
			if st := states[in.id]; in.state == "InService" && st != "running" && st != "pending" {
				in.health = "Unhealthy"
			}
		}
	}
}

// reconcile moves every group toward its desired capacity: it starts launches and
// terminations, which finish in goroutines and wake the loop again.
func (a *AutoScaling) reconcile(ctx context.Context) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ctx.Err() != nil {
		return
	}
	a.checkHealth()
	now := a.now()
	for _, name := range slices.Sorted(maps.Keys(a.groups)) {
		g := a.groups[name]
		if g.deleting && len(g.instances) == 0 && g.inFlight() == 0 {
			delete(a.groups, name)
			for _, act := range a.activities {
				if act.group == name {
					act.groupDeleted = true
				}
			}
			continue
		}
		// Unhealthy instances are replaced: terminated here, launched again below.
		for _, id := range slices.Sorted(maps.Keys(g.instances)) {
			if in := g.instances[id]; in.health == "Unhealthy" && in.state == "InService" {
				cause := fmt.Sprintf("At %s an instance was taken out of service in response to an EC2 instance status check failure.", now.UTC().Format(time.RFC3339))
				a.terminate(ctx, g, in, cause)
			}
		}
		desired := g.desired
		if g.deleting {
			desired = 0
		}
		active, byZone := g.active()
		have := active + g.inFlight()
		switch {
		case have < desired:
			for range desired - have {
				if !a.launch(ctx, g, now, have, desired) {
					break
				}
			}
		case have > desired && active > 0:
			excess := min(have-desired, active)
			for range excess {
				in := g.pickForTermination(byZone)
				if in == nil {
					break
				}
				byZone[in.zone]--
				cause := fmt.Sprintf("At %s an instance was taken out of service in response to a difference between desired and actual capacity, shrinking the capacity from %d to %d.  At %s instance %s was selected for termination.",
					now.UTC().Format(time.RFC3339), have, desired, now.UTC().Format(time.RFC3339), in.id)
				if g.deleting {
					cause = fmt.Sprintf("At %s the Auto Scaling group %s was deleted, terminating its instances.", now.UTC().Format(time.RFC3339), g.name)
				}
				a.terminate(ctx, g, in, cause)
			}
		}
	}
}

// pickZone picks the enabled zone with the fewest instances (and launches under way)
// that is not backing off after a failed launch; "" when every zone backs off.
func (g *asGroup) pickZone(now time.Time) string {
	_, byZone := g.active()
	best, bestN := "", 0
	for _, z := range g.zones {
		if now.Before(g.backoff[z]) {
			continue
		}
		n := byZone[z] + g.launching[z]
		if best == "" || n < bestN {
			best, bestN = z, n
		}
	}
	return best
}

// pickSubnet picks the zone's subnet with the fewest instances.
func (g *asGroup) pickSubnet(a *AutoScaling, zone string) string {
	counts := map[string]int{}
	for _, in := range g.instances {
		counts[in.subnet]++
	}
	best := ""
	for _, s := range g.subnets {
		if z, _ := a.zoneOf(s); z == zone && (best == "" || counts[s] < counts[best]) {
			best = s
		}
	}
	return best
}

// pickForTermination follows the default termination policy: the zone with the most
// instances, then the oldest launch template (or version), then the oldest instance.
func (g *asGroup) pickForTermination(byZone map[string]int) *asInstance {
	var cands []*asInstance
	for _, in := range g.instances {
		if in.state != "Terminating" && (!in.protected || g.deleting) {
			cands = append(cands, in)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	current := g.currentTemplate()
	slices.SortFunc(cands, func(x, y *asInstance) int {
		if c := cmp.Compare(byZone[y.zone], byZone[x.zone]); c != 0 {
			return c
		}
		// Among zones as full, an instance of another template, or of an older
		// version, goes first.
		xo, yo := x.lt.ID != current.ID, y.lt.ID != current.ID
		if xo != yo {
			if xo {
				return -1
			}
			return 1
		}
		xv, _ := strconv.Atoi(x.lt.Version)
		yv, _ := strconv.Atoi(y.lt.Version)
		if c := cmp.Compare(xv, yv); c != 0 {
			return c
		}
		if c := cmp.Compare(x.zone, y.zone); c != 0 {
			return c
		}
		if c := x.launched.Compare(y.launched); c != 0 {
			return c
		}
		return cmp.Compare(x.id, y.id)
	})
	return cands[0]
}

// currentTemplate is the launch template the group launches from.
func (g *asGroup) currentTemplate() ltSpec {
	if g.mip != nil {
		return g.mip.lt
	}
	if g.lt != nil {
		return *g.lt
	}
	return ltSpec{}
}

// launch starts one launch of g, returning false when none can start now (every zone
// backs off); a.mu is held.
func (a *AutoScaling) launch(ctx context.Context, g *asGroup, now time.Time, have, desired int64) bool {
	zone := g.pickZone(now)
	if zone == "" {
		return false
	}
	subnet := g.pickSubnet(a, zone)
	cause := fmt.Sprintf("At %s an instance was started in response to a difference between desired and actual capacity, increasing the capacity from %d to %d.",
		now.UTC().Format(time.RFC3339), have, desired)
	details := fmt.Sprintf(`{"Subnet ID":%q,"Availability Zone":%q}`, subnet, zone)
	act := a.addActivity(g, "Launching a new EC2 instance", cause, details)
	spec, err := a.launchSpec(g, zone, subnet)
	if err == nil && a.launcher == nil {
		err = &LaunchError{"InternalFailure", "The local cloud has no instance launcher."}
	}
	if err == nil && a.instanceLimit > 0 {
		if n := a.runningInstances(); n >= a.instanceLimit {
			err = &LaunchError{"InstanceLimitExceeded", fmt.Sprintf("You have requested more instances (%d) than your current instance limit of %d allows for the specified instance type. Please visit http://aws.amazon.com/contact-us/ec2-request to request an adjustment to this limit.", n+1, a.instanceLimit)}
		}
	}
	if err != nil {
		a.launchFailed(g, act, zone, err)
		return true
	}
	if g.launching == nil {
		g.launching = map[string]int{}
	}
	g.launching[zone]++
	launcher := a.launcher
	a.ops.Add(1)
	go func() {
		defer a.ops.Done()
		id, err := launcher.Launch(ctx, spec)
		a.mu.Lock()
		g.launching[zone]--
		if err != nil {
			a.launchFailed(g, act, zone, err)
		} else {
			in := &asInstance{id: id, zone: zone, subnet: subnet, instanceType: spec.InstanceType, state: "InService", health: "Healthy",
				launched: a.now().UTC(), protected: g.protectNew,
				lt: ltSpec{ID: spec.Template.ID, Name: spec.Template.Name, Version: strconv.FormatInt(spec.Template.Version, 10)}}
			g.instances[id] = in
			act.description = "Launching a new EC2 instance: " + id
			act.finish(a.now(), "")
			a.cfg.Log.Info("auto scaling launched an instance", "group", g.name, "instance", id, "zone", zone)
		}
		a.mu.Unlock()
		a.wake()
	}()
	return true
}

// launchFailed records a failed launch; a.mu is held.
func (a *AutoScaling) launchFailed(g *asGroup, act *activity, zone string, err error) {
	msg := err.Error()
	var le *LaunchError
	if errors.As(err, &le) {
		msg = le.Message
	}
	msg += " Launching EC2 instance failed."
	act.description = "Launching a new EC2 instance.  Status Reason: " + msg
	act.finish(a.now(), msg)
	if g.backoff == nil {
		g.backoff = map[string]time.Time{}
	}
	g.backoff[zone] = a.now().Add(a.cfg.RetryDelay)
	a.cfg.Log.Warn("auto scaling launch failed", "group", g.name, "zone", zone, "err", msg)
}

// launchSpec resolves what g launches now in zone.
func (a *AutoScaling) launchSpec(g *asGroup, zone, subnet string) (LaunchSpec, error) {
	spec := LaunchSpec{GroupName: g.name, AvailabilityZone: zone, SubnetID: subnet}
	cur := g.currentTemplate()
	// The group holds both the ID and the name; the ID is what stays true.
	t, err := a.cfg.Templates.Resolve(cur.ID, "", cur.Version)
	if err != nil {
		return spec, &LaunchError{"InvalidLaunchTemplate", "The specified launch template does not exist or is not valid: " + err.Error()}
	}
	spec.Template, spec.ImageID, spec.InstanceType = t, t.Data.ImageID, t.Data.InstanceType
	if g.mip != nil && len(g.mip.overrides) > 0 {
		// On-Demand "prioritized": the first override's type.
		spec.InstanceType = g.mip.overrides[0].InstanceType
	}
	if spec.InstanceType == "" {
		return spec, &LaunchError{"MissingParameter", "The request must contain the parameter InstanceType."}
	}
	if spec.UserData, err = t.Data.DecodedUserData(); err != nil {
		return spec, &LaunchError{"InvalidUserData.Malformed", "Invalid BASE64 encoding of user data."}
	}
	if p := t.Data.IAMInstanceProfile; p != nil {
		spec.IAMInstanceProfile = cmp.Or(p.ARN, p.Name)
	}
	spec.SecurityGroupIDs = slices.Clone(t.Data.SecurityGroupIDs)
	for _, ni := range t.Data.NetworkInterfaces {
		if ni.DeviceIndex != nil && *ni.DeviceIndex == 0 {
			spec.SecurityGroupIDs = append(spec.SecurityGroupIDs, ni.Groups...)
		}
	}
	spec.Tags = t.Data.InstanceTags()
	for _, tag := range g.tags {
		if tag.Propagate {
			spec.Tags[tag.Key] = tag.Value
		}
	}
	spec.Tags["aws:autoscaling:groupName"] = g.name
	spec.Tags["aws:ec2launchtemplate:id"] = t.ID
	spec.Tags["aws:ec2launchtemplate:version"] = strconv.FormatInt(t.Version, 10)
	return spec, nil
}

// terminate starts terminating an instance of g; a.mu is held.
func (a *AutoScaling) terminate(ctx context.Context, g *asGroup, in *asInstance, cause string) *activity {
	in.state = "Terminating"
	act := a.addActivity(g, "Terminating EC2 instance: "+in.id, cause, fmt.Sprintf(`{"Subnet ID":%q,"Availability Zone":%q}`, in.subnet, in.zone))
	launcher := a.launcher
	a.ops.Add(1)
	go func() {
		defer a.ops.Done()
		var err error
		if launcher == nil {
			err = errors.New("the local cloud has no instance launcher")
		} else {
			err = launcher.Terminate(ctx, in.id)
		}
		a.mu.Lock()
		if err != nil {
			// Tried again on a later pass (not at once: no hot loop on a failing launcher).
			in.state = "InService"
			act.finish(a.now(), err.Error())
			a.cfg.Log.Warn("auto scaling could not terminate an instance", "group", g.name, "instance", in.id, "err", err)
			a.mu.Unlock()
			return
		}
		delete(g.instances, in.id)
		act.finish(a.now(), "")
		a.cfg.Log.Info("auto scaling terminated an instance", "group", g.name, "instance", in.id)
		a.mu.Unlock()
		a.wake()
	}()
	return act
}

// WithTags tags a launched instance.
func WithTags(tags map[string]string) LaunchOption {
	return func(r *InstanceRecord) { r.Tags = maps.Clone(tags) }
}

// InstanceProfileRole returns the role of an instance profile named by name or ARN
// (arn:aws:iam::ACCOUNT:instance-profile/NAME), as a launch resolves it; false for a
// profile the account does not have.
func (i *IAM) InstanceProfileRole(nameOrARN string) (string, bool) {
	name := nameOrARN
	if strings.HasPrefix(nameOrARN, "arn:") {
		_, after, ok := strings.Cut(nameOrARN, ":instance-profile/")
		if !ok {
			return "", false
		}
		name = after[strings.LastIndex(after, "/")+1:]
	}
	return i.profile(name)
}
