package kubeletsim

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/nodejoin/nodejoin/internal/addons"
)

const testToken = "abcdef.0123456789abcdef"

func validConfig() Config {
	return Config{NodeName: "ip-198-18-0-11.local.internal", InternalIP: "198.18.0.11", Server: "https://127.0.0.1:6443", CAData: []byte("pem"), BootstrapToken: testToken}
}

func TestConfigValidation(t *testing.T) {
	for name, tc := range map[string]struct {
		change func(*Config)
		want   string
	}{
		"no node name":         {func(c *Config) { c.NodeName = "" }, "no node name"},
		"IPv6 address":         {func(c *Config) { c.InternalIP = "fd00::1" }, `internal IP "fd00::1" is not an IPv4 address`},
		"no server":            {func(c *Config) { c.Server = "" }, "URL and CA are required"},
		"no CA":                {func(c *Config) { c.CAData = nil }, "URL and CA are required"},
		"both credentials":     {func(c *Config) { c.Exec = &clientcmdapi.ExecConfig{Command: "nodeadm"} }, "exactly one of"},
		"no credentials":       {func(c *Config) { c.BootstrapToken = "" }, "exactly one of"},
		"malformed token":      {func(c *Config) { c.BootstrapToken = "ABCDEF.secretsecretsecret" }, "bootstrap token is not of the form"},
		"lease under a second": {func(c *Config) { c.LeaseDuration = time.Millisecond }, "lease duration 1ms"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := validConfig()
			tc.change(&cfg)
			err := cfg.complete()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("the error repeats the token: %v", err)
			}
		})
	}
	cfg := validConfig()
	if err := cfg.complete(); err != nil {
		t.Fatal(err)
	}
	if cfg.InternalDNS != cfg.NodeName || cfg.Version != "v1.37.1" || cfg.LeaseDuration != 40*time.Second || cfg.StatusInterval != time.Minute ||
		cfg.QPS != 5 || cfg.Burst != 10 || cfg.PodCIDR != netip.MustParsePrefix("10.128.11.0/24") {
		t.Errorf("defaults: %+v", cfg)
	}
	mem := cfg.Allocatable[corev1.ResourceMemory]
	disk := cfg.Allocatable[corev1.ResourceEphemeralStorage]
	if mem.String() != "8092Mi" || disk.Value() != 20*1024*1024*1024/10*9 || !cfg.Allocatable.Cpu().Equal(resource.MustParse("2")) {
		t.Errorf("allocatable = %v", cfg.Allocatable)
	}
}

func newTestKubelet(t *testing.T, change func(*Config)) *Kubelet {
	t.Helper()
	cfg := validConfig()
	if change != nil {
		change(&cfg)
	}
	if err := cfg.complete(); err != nil {
		t.Fatal(err)
	}
	return &Kubelet{cfg: cfg, bootID: "b00t"}
}

// The node reports what a kubelet with --hostname-override and --node-ip reports on an
// instance with a private DNS name, and the user's labels win over the kubelet's.
func TestNodeStatusAndLabels(t *testing.T) {
	k := newTestKubelet(t, func(c *Config) {
		c.InstanceType, c.Zone, c.Region = "m5.large", "us-west-2a", "us-west-2"
		c.Labels = map[string]string{"eks.amazonaws.com/nodegroup": "workers", corev1.LabelArchStable: "arm64"}
	})
	l := k.labels()
	for key, want := range map[string]string{
		corev1.LabelHostname: "ip-198-18-0-11.local.internal", corev1.LabelOSStable: "linux", corev1.LabelArchStable: "arm64",
		corev1.LabelInstanceTypeStable: "m5.large", corev1.LabelTopologyZone: "us-west-2a", corev1.LabelTopologyRegion: "us-west-2",
		"eks.amazonaws.com/nodegroup": "workers", addons.SimulatedNodeLabel: "true",
	} {
		if l[key] != want {
			t.Errorf("label %s = %q, want %q", key, l[key], want)
		}
	}
	if _, ok := newTestKubelet(t, nil).labels()[corev1.LabelTopologyZone]; ok {
		t.Error("a zone label without a zone")
	}
	// --register-with-taints, then the uninitialized taint of --cloud-provider=external.
	dedicated := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	tk := newTestKubelet(t, func(c *Config) { c.RegisterWithTaints, c.ExternalCloudProvider = []corev1.Taint{dedicated}, true })
	if got := tk.registerTaints(); !slices.Equal(got, []corev1.Taint{dedicated, {Key: taintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule}}) {
		t.Errorf("registration taints = %v", got)
	}

	t0 := metav1.NewTime(time.Unix(1000, 0))
	st := k.nodeStatus(t0, nil)
	if got := st.Addresses; !slices.Equal(got, []corev1.NodeAddress{{Type: "InternalIP", Address: "198.18.0.11"}, {Type: "InternalDNS", Address: k.cfg.NodeName}, {Type: "Hostname", Address: k.cfg.NodeName}}) {
		t.Errorf("addresses = %v", got)
	}
	if len(st.Conditions) != 4 || st.Conditions[3].Type != corev1.NodeReady || st.Conditions[3].Status != corev1.ConditionTrue || st.Conditions[3].Reason != "KubeletReady" {
		t.Errorf("conditions = %+v", st.Conditions)
	}
	for _, c := range st.Conditions[:3] {
		if c.Status != corev1.ConditionFalse {
			t.Errorf("condition %s = %s", c.Type, c.Status)
		}
	}
	ni := st.NodeInfo
	if ni.KubeletVersion != "v1.37.1" || ni.OperatingSystem != "linux" || ni.Architecture != "amd64" || !strings.HasPrefix(ni.ContainerRuntimeVersion, "containerd://") ||
		!regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(ni.MachineID) || !regexp.MustCompile(`^ec2[0-9a-f]{5}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`).MatchString(ni.SystemUUID) {
		t.Errorf("node info = %+v", ni)
	}
	if k.statusChanged(&st) {
		t.Error("the status it just computed counts as changed")
	}
	// A heartbeat keeps transition times; a condition another writer changed counts as
	// a change, and is set back with a new transition time.
	t1 := metav1.NewTime(t0.Add(time.Minute))
	next := k.nodeStatus(t1, &st)
	if !next.Conditions[3].LastTransitionTime.Equal(&t0) || !next.Conditions[3].LastHeartbeatTime.Equal(&t1) {
		t.Errorf("heartbeat: %+v", next.Conditions[3])
	}
	next.Conditions[3].Status = corev1.ConditionUnknown
	if !k.statusChanged(&next) {
		t.Error("a Ready condition set to Unknown does not count as a change")
	}
	if again := k.nodeStatus(t1, &next); !again.Conditions[3].LastTransitionTime.Equal(&t1) {
		t.Errorf("after Unknown: %+v", again.Conditions[3])
	}
}

// The serving CSR names every DNS name and IP address of the node once, sorted.
func TestServingTemplate(t *testing.T) {
	k := newTestKubelet(t, func(c *Config) { c.InternalDNS = "ip-198-18-0-11.us-west-2.compute.internal" })
	tmpl := k.servingTemplate()
	if tmpl.Subject.CommonName != "system:node:ip-198-18-0-11.local.internal" || !slices.Equal(tmpl.Subject.Organization, []string{"system:nodes"}) {
		t.Errorf("subject = %v", tmpl.Subject)
	}
	if !slices.Equal(tmpl.DNSNames, []string{"ip-198-18-0-11.us-west-2.compute.internal"}) || len(tmpl.IPAddresses) != 1 || tmpl.IPAddresses[0].String() != "198.18.0.11" {
		t.Errorf("SANs = %v %v", tmpl.DNSNames, tmpl.IPAddresses)
	}
}

func TestBootstrapCSRName(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:a", Organization: []string{"system:nodes"}}}
	a, _ := bootstrapCSRName(key, tmpl, clientUsages)
	b, _ := bootstrapCSRName(key, tmpl, clientUsages)
	c, _ := bootstrapCSRName(other, tmpl, clientUsages)
	if a != b || a == c || !regexp.MustCompile(`^node-csr-[A-Za-z0-9_-]{43}$`).MatchString(a) {
		t.Errorf("names %s %s %s", a, b, c)
	}
}

func TestRotationDeadlineIsBetween70And90Percent(t *testing.T) {
	nb := time.Unix(0, 0)
	cert := &x509.Certificate{NotBefore: nb, NotAfter: nb.Add(100 * time.Hour)}
	for range 1000 {
		d := jitteredDeadline(cert).Sub(nb)
		if d < 70*time.Hour || d > 90*time.Hour {
			t.Fatalf("deadline at %s of 100h", d)
		}
	}
}

func TestPodIPs(t *testing.T) {
	if got := DefaultPodCIDR(netip.MustParseAddr("198.18.1.200")); got != netip.MustParsePrefix("10.129.200.0/24") {
		t.Errorf("pod CIDR = %s", got)
	}
	p := newPodIPs(netip.MustParsePrefix("10.128.11.0/30"))
	a, ok1 := p.get("a", "")
	b, ok2 := p.get("b", "")
	_, ok3 := p.get("c", "")
	if !ok1 || !ok2 || ok3 || a.String() != "10.128.11.1" || b.String() != "10.128.11.2" {
		t.Fatalf("got %s %v, %s %v, third %v", a, ok1, b, ok2, ok3)
	}
	if again, _ := p.get("a", ""); again != a {
		t.Errorf("a pod's address changed: %s", again)
	}
	p.release("a")
	if c, ok := p.get("c", ""); !ok || c != a {
		t.Errorf("released address not reused: %s %v", c, ok)
	}
	// After a restart the node keeps the address a pod reports.
	q := newPodIPs(netip.MustParsePrefix("10.128.11.0/24"))
	if kept, _ := q.get("x", "10.128.11.77"); kept.String() != "10.128.11.77" {
		t.Errorf("reported address not kept: %s", kept)
	}
	if other, _ := q.get("y", "10.128.11.77"); other.String() == "10.128.11.77" {
		t.Error("two pods share an address")
	}
}

func TestRunningStatus(t *testing.T) {
	now := metav1.NewTime(time.Unix(2000, 0))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: types.UID("u1"), Generation: 1},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "setup", Image: "busybox"}, {Name: "proxy", Image: "envoy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}},
			Containers:     []corev1.Container{{Name: "app", Image: "nginx"}, {Name: "log", Image: "fluentbit"}},
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "example.com/lb"}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBestEffort},
	}
	if running(pod) {
		t.Fatal("a pending pod counts as running")
	}
	st := runningStatus(pod, "198.18.0.11", "10.128.11.1", now)
	if st.Phase != corev1.PodRunning || st.HostIP != "198.18.0.11" || st.PodIP != "10.128.11.1" || st.StartTime == nil || st.QOSClass != corev1.PodQOSBestEffort {
		t.Errorf("status = %+v", st)
	}
	if len(st.InitContainerStatuses) != 2 || st.InitContainerStatuses[0].State.Terminated == nil || st.InitContainerStatuses[0].State.Terminated.Reason != "Completed" ||
		st.InitContainerStatuses[1].State.Running == nil || !st.InitContainerStatuses[1].Ready {
		t.Errorf("init containers = %+v", st.InitContainerStatuses)
	}
	for i, c := range st.ContainerStatuses {
		if c.Name != pod.Spec.Containers[i].Name || c.State.Running == nil || !c.Ready || !*c.Started || !strings.HasPrefix(c.ContainerID, "containerd://") {
			t.Errorf("container %d = %+v", i, c)
		}
	}
	conds := map[corev1.PodConditionType]corev1.ConditionStatus{}
	for _, c := range st.Conditions {
		conds[c.Type] = c.Status
	}
	want := map[corev1.PodConditionType]corev1.ConditionStatus{
		corev1.PodReadyToStartContainers: "True", corev1.PodInitialized: "True", corev1.ContainersReady: "True", corev1.PodScheduled: "True",
		corev1.PodReady: "False", // the readiness gate is not True yet
	}
	for typ, s := range want {
		if conds[typ] != s {
			t.Errorf("condition %s = %s, want %s", typ, conds[typ], s)
		}
	}
	pod.Status = st
	if !running(pod) {
		t.Error("the running status does not count as running")
	}
	// The gate turns True: the pod is to be made Ready.
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: "example.com/lb", Status: corev1.ConditionTrue})
	if running(pod) {
		t.Error("a pod whose readiness gate turned True counts as done")
	}
	later := runningStatus(pod, "198.18.0.11", "10.128.11.1", metav1.NewTime(now.Add(time.Minute)))
	for _, c := range later.Conditions {
		if c.Type == corev1.PodReady && c.Status != corev1.ConditionTrue {
			t.Errorf("Ready after the gate = %+v", c)
		}
		if c.Type == corev1.PodInitialized && !c.LastTransitionTime.Equal(&now) {
			t.Errorf("Initialized changed its transition time: %+v", c)
		}
	}
	if !later.ContainerStatuses[0].State.Running.StartedAt.Equal(&now) {
		t.Error("a running container's start time changed")
	}
}
