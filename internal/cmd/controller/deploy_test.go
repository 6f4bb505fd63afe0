package controller

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	sigsjson "sigs.k8s.io/json"
	sigsyaml "sigs.k8s.io/yaml"
)

// deployDir holds the manifests that run nodejoin-controller in a cluster.
var deployDir = filepath.Join("..", "..", "..", "deploy")

const (
	deployNamespace     = "nodejoin-system"
	controllerName      = "nodejoin-controller"
	controllerContainer = "controller"
	webhookService      = "nodejoin-webhook"
)

// deployKinds are the kinds deploy/ may hold, each with its apiVersion and the typed
// object it decodes into. A kind not listed fails the test: add it here with its type.
var deployKinds = map[string]struct {
	apiVersion string
	namespaced bool
	new        func() any
}{
	"Namespace":           {"v1", false, func() any { return &corev1.Namespace{} }},
	"ServiceAccount":      {"v1", true, func() any { return &corev1.ServiceAccount{} }},
	"ConfigMap":           {"v1", true, func() any { return &corev1.ConfigMap{} }},
	"Service":             {"v1", true, func() any { return &corev1.Service{} }},
	"Deployment":          {"apps/v1", true, func() any { return &appsv1.Deployment{} }},
	"PodDisruptionBudget": {"policy/v1", true, func() any { return &policyv1.PodDisruptionBudget{} }},
	"NetworkPolicy":       {"networking.k8s.io/v1", true, func() any { return &networkingv1.NetworkPolicy{} }},
	"Role":                {"rbac.authorization.k8s.io/v1", true, func() any { return &rbacv1.Role{} }},
	"RoleBinding":         {"rbac.authorization.k8s.io/v1", true, func() any { return &rbacv1.RoleBinding{} }},
	"ClusterRole":         {"rbac.authorization.k8s.io/v1", false, func() any { return &rbacv1.ClusterRole{} }},
	"ClusterRoleBinding":  {"rbac.authorization.k8s.io/v1", false, func() any { return &rbacv1.ClusterRoleBinding{} }},
	"FlowSchema":          {"flowcontrol.apiserver.k8s.io/v1", false, func() any { return &flowcontrolv1.FlowSchema{} }},
	// apiextensions types are not a dependency: checked as unstructured.
	"CustomResourceDefinition": {"apiextensions.k8s.io/v1", false, func() any { return &unstructured.Unstructured{} }},
}

// deployObject is one YAML document of deploy/, decoded.
type deployObject struct {
	where string // file and document number, for messages
	kind  string
	obj   any
}

// loadDeploy decodes every YAML document under deploy/ strictly into its typed object.
func loadDeploy(t *testing.T) []deployObject {
	t.Helper()
	var objs []deployObject
	seen := map[string]string{}
	err := filepath.WalkDir(deployDir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == "cloudformation" {
			return filepath.SkipDir // CloudFormation templates, tested by the template package
		}
		if err != nil || d.IsDir() {
			return err
		}
		switch filepath.Ext(path) {
		case ".yaml", ".yml":
		default: // the .kubeconfig is checked by TestDeployTokenWebhookKubeconfig
			return nil
		}
		data, err := os.ReadFile(path) //nolint:gosec // G122: the repository's own deploy/ tree, read by a test.
		if err != nil {
			return err
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for i := 1; ; i++ {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			where := fmt.Sprintf("%s (document %d)", path, i)
			var head struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Metadata   struct {
					Name      string `json:"name"`
					Namespace string `json:"namespace"`
				} `json:"metadata"`
			}
			var probe map[string]any
			if err := sigsyaml.Unmarshal(doc, &probe); err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			if probe == nil { // only comments
				continue
			}
			if err := sigsyaml.Unmarshal(doc, &head); err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			k, ok := deployKinds[head.Kind]
			if !ok {
				t.Errorf("%s: kind %q is not one deploy_test.go knows", where, head.Kind)
				continue
			}
			if head.APIVersion != k.apiVersion {
				t.Errorf("%s: %s has apiVersion %q, want %q", where, head.Kind, head.APIVersion, k.apiVersion)
			}
			if head.Metadata.Name == "" {
				t.Errorf("%s: %s has no metadata.name", where, head.Kind)
			}
			// Without a namespace, kubectl apply would put the object in the current one.
			if k.namespaced != (head.Metadata.Namespace != "") {
				t.Errorf("%s: %s %s has namespace %q; namespaced kinds need one, others none", where, head.Kind, head.Metadata.Name, head.Metadata.Namespace)
			}
			id := head.Kind + " " + head.Metadata.Namespace + "/" + head.Metadata.Name
			if prev, dup := seen[id]; dup {
				t.Errorf("%s: %s is also in %s", where, id, prev)
			}
			seen[id] = where
			obj := k.new()
			if u, ok := obj.(*unstructured.Unstructured); ok {
				if err := sigsyaml.UnmarshalStrict(doc, &u.Object); err != nil {
					t.Errorf("%s: %v", where, err)
					continue
				}
				checkCRD(t, where, u)
			} else if err := decodeStrict(doc, obj); err != nil {
				// Unknown and duplicate fields fail here.
				t.Errorf("%s: %v", where, err)
				continue
			}
			objs = append(objs, deployObject{where: where, kind: head.Kind, obj: obj})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// decodeStrict decodes a YAML document into obj, failing on unknown or duplicate fields.
// sigs.k8s.io/yaml matches field names without regard to case, as encoding/json does;
// kube-apiserver does not, and would drop a field such as readOnlyRootFileSystem. A
// second, case-sensitive pass catches those.
func decodeStrict(doc []byte, obj any) error {
	if err := sigsyaml.UnmarshalStrict(doc, obj); err != nil {
		return err
	}
	js, err := sigsyaml.YAMLToJSON(doc)
	if err != nil {
		return err
	}
	fresh := reflect.New(reflect.TypeOf(obj).Elem()).Interface()
	strictErrs, err := sigsjson.UnmarshalStrict(js, fresh, sigsjson.DisallowUnknownFields, sigsjson.DisallowDuplicateFields)
	if err != nil {
		return err
	}
	return errors.Join(strictErrs...)
}

func checkCRD(t *testing.T, where string, u *unstructured.Unstructured) {
	t.Helper()
	group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(u.Object, "spec", "names", "plural")
	if group == "" || plural == "" || u.GetName() != plural+"."+group {
		t.Errorf("%s: CustomResourceDefinition %q: want metadata.name <spec.names.plural>.<spec.group>, have plural %q, group %q", where, u.GetName(), plural, group)
	}
}

// find returns the one object of a kind and name.
func find[T any](t *testing.T, objs []deployObject, kind, name string) T {
	t.Helper()
	var found []T
	for _, o := range objs {
		if o.kind != kind {
			continue
		}
		if m, ok := o.obj.(interface{ GetName() string }); ok && m.GetName() == name {
			found = append(found, o.obj.(T))
		}
	}
	if len(found) != 1 {
		t.Fatalf("deploy/ has %d %s named %s, want 1", len(found), kind, name)
	}
	return found[0]
}

var envRefRE = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expandArgs replaces $(VAR) as the kubelet does, with dummy values for the container's
// env variables; a reference to an undefined variable is an error, as the kubelet would
// leave it literal.
func expandArgs(c *corev1.Container) ([]string, error) {
	defined := map[string]bool{}
	for _, e := range c.Env {
		defined[e.Name] = true
	}
	var out []string
	var undefined []string
	for _, a := range c.Args {
		out = append(out, envRefRE.ReplaceAllStringFunc(a, func(ref string) string {
			name := envRefRE.FindStringSubmatch(ref)[1]
			if !defined[name] {
				undefined = append(undefined, name)
			}
			return strings.ToLower(name) + "-dummy"
		}))
	}
	if len(undefined) > 0 {
		return nil, fmt.Errorf("args refer to undefined env variables %v", undefined)
	}
	return out, nil
}

// flagValues maps each --name=value argument to its value.
func flagValues(t *testing.T, args []string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, a := range args {
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !ok {
			// One form only, so that every value stays next to its flag.
			t.Errorf("controller arg %q: want --name=value", a)
			continue
		}
		if _, dup := m[name]; dup && name != "sts-host" {
			t.Errorf("flag --%s is given twice", name)
		}
		m[name] = value
	}
	return m
}

func portOf(t *testing.T, flag, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Errorf("--%s=%s: %v", flag, addr, err)
		return 0
	}
	var n int32
	if _, err := fmt.Sscan(p, &n); err != nil {
		t.Errorf("--%s=%s: port: %v", flag, addr, err)
	}
	return n
}

func containerPort(c *corev1.Container, name string) (int32, bool) {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort, true
		}
	}
	return 0, false
}

func TestDeployManifests(t *testing.T) {
	objs := loadDeploy(t)
	dep := find[*appsv1.Deployment](t, objs, "Deployment", controllerName)
	if dep.Namespace != deployNamespace {
		t.Errorf("Deployment namespace = %q, want %s", dep.Namespace, deployNamespace)
	}
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 2 {
		t.Errorf("Deployment replicas = %v, want 2", dep.Spec.Replicas)
	}
	pod := &dep.Spec.Template
	sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
	if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
		t.Errorf("Deployment selector %v does not select its pods %v (%v)", dep.Spec.Selector, pod.Labels, err)
	}
	if sa := pod.Spec.ServiceAccountName; sa == "" {
		t.Error("the pod has no serviceAccountName")
	} else {
		_ = find[*corev1.ServiceAccount](t, objs, "ServiceAccount", sa)
	}

	var c *corev1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == controllerContainer {
			c = &pod.Spec.Containers[i]
		}
	}
	if c == nil {
		t.Fatalf("the Deployment has no container %q", controllerContainer)
	}
	if len(c.Command) != 0 {
		t.Errorf("command = %v: the image's entrypoint is nodejoin-controller; give args only", c.Command)
	}

	// --identity=$(POD_NAME), from the downward API.
	var podName *corev1.EnvVar
	for i := range c.Env {
		if c.Env[i].Name == "POD_NAME" {
			podName = &c.Env[i]
		}
	}
	if podName == nil || podName.ValueFrom == nil || podName.ValueFrom.FieldRef == nil || podName.ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("env POD_NAME = %+v, want the downward API's metadata.name", podName)
	}
	if !slices.Contains(c.Args, "--identity=$(POD_NAME)") {
		t.Errorf("args %v lack --identity=$(POD_NAME)", c.Args)
	}

	t.Run("args parse as nodejoin-controller run's flags", func(t *testing.T) {
		args, err := expandArgs(c)
		if err != nil {
			t.Fatal(err)
		}
		if len(args) == 0 || args[0] != "run" {
			t.Fatalf("args = %v, want the run command first", args)
		}
		args = args[1:]
		cmd := runCommand()
		flagValues(t, args)
		// Names the flags that run does not define, all at once; the others must parse.
		var known []string
		var missing []string
		for _, a := range args {
			name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			if cmd.Flags().Lookup(name) == nil {
				missing = append(missing, "--"+name)
				continue
			}
			known = append(known, a)
		}
		if err := cmd.ParseFlags(known); err != nil {
			t.Errorf("parsing %v: %v", known, err)
		}
		if len(missing) > 0 {
			t.Errorf("nodejoin-controller run does not define %s", strings.Join(missing, ", "))
		}
		if cmd.Flags().Lookup("leader-elect") == nil {
			return
		}
		if le, err := cmd.Flags().GetBool("leader-elect"); err != nil || !le {
			t.Errorf("--leader-elect = %v (%v), want true", le, err)
		}
	})

	flags := flagValues(t, c.Args[1:])
	for _, want := range []struct{ flag, port string }{
		{"webhook-listen", "webhook"}, {"metrics-bind-address", "metrics"}, {"health-probe-bind-address", "health"},
	} {
		addr, ok := flags[want.flag]
		if !ok {
			t.Errorf("args lack --%s", want.flag)
			continue
		}
		cp, ok := containerPort(c, want.port)
		if !ok {
			t.Errorf("the container has no port named %s", want.port)
			continue
		}
		if p := portOf(t, want.flag, addr); p != cp {
			t.Errorf("--%s=%s, but container port %s is %d", want.flag, addr, want.port, cp)
		}
	}
	for _, probe := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Port != intstr.FromString("health") {
			t.Errorf("probe %+v: want an HTTP probe on port health", probe)
		}
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources = %+v: want cpu and memory requests and a memory limit", c.Resources)
	}

	// Every mount has its volume; Secrets are mounted read-only; every file flag points
	// into a mount.
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		volumes[v.Name] = v
	}
	for _, m := range c.VolumeMounts {
		v, ok := volumes[m.Name]
		switch {
		case !ok:
			t.Errorf("volume mount %s has no volume", m.Name)
		case v.Secret != nil && !m.ReadOnly:
			t.Errorf("Secret volume %s is mounted writable", m.Name)
		}
	}
	for name, value := range flags {
		if !strings.HasPrefix(value, "/") {
			continue
		}
		if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return strings.HasPrefix(value, m.MountPath+"/") }) {
			t.Errorf("--%s=%s is in no volume mount", name, value)
		}
	}
	if _, ok := flags["webhook-client-ca-file"]; !ok {
		t.Error("args lack --webhook-client-ca-file: the webhook would serve any client")
	}
	if !slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Secret != nil && v.Secret.SecretName == "nodejoin-webhook-tls" }) {
		t.Error("no volume mounts Secret nodejoin-webhook-tls")
	}
	// The default install approves only (kube-controller-manager signs): no CA key.
	if slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Secret != nil && v.Secret.SecretName == "nodejoin-ca" }) || flags["ca-key"] != "" {
		t.Error("the default install mounts the CA key (Secret nodejoin-ca, --ca-key); it should approve only (--csr=approve)")
	}

	// Security: non-root, no privilege escalation, read-only root, all capabilities
	// dropped, the runtime's seccomp profile.
	psc, csc := pod.Spec.SecurityContext, c.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	if csc == nil {
		t.Fatal("the container has no securityContext")
	}
	if !isTrue(csc.RunAsNonRoot) && !isTrue(psc.RunAsNonRoot) {
		t.Error("runAsNonRoot is not set")
	}
	for _, uid := range []*int64{csc.RunAsUser, psc.RunAsUser} {
		if uid != nil && *uid == 0 {
			t.Error("runAsUser is 0")
		}
	}
	if csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation is not false")
	}
	if !isTrue(csc.ReadOnlyRootFilesystem) {
		t.Error("readOnlyRootFilesystem is not true")
	}
	if isTrue(csc.Privileged) {
		t.Error("the container is privileged")
	}
	if csc.Capabilities == nil || !slices.Contains(csc.Capabilities.Drop, "ALL") || len(csc.Capabilities.Add) > 0 {
		t.Errorf("capabilities = %+v, want ALL dropped and none added", csc.Capabilities)
	}
	seccomp := csc.SeccompProfile
	if seccomp == nil {
		seccomp = psc.SeccompProfile
	}
	if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("seccompProfile = %+v, want RuntimeDefault", seccomp)
	}
	if pod.Spec.HostNetwork || pod.Spec.HostPID || pod.Spec.HostIPC {
		t.Error("the shipped manifest uses host namespaces; that is the documented variant, not the default")
	}

	// The webhook Service reaches the container's webhook port.
	svc := find[*corev1.Service](t, objs, "Service", webhookService)
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels)) || len(svc.Spec.Selector) == 0 {
		t.Errorf("Service selector %v does not select the pods %v", svc.Spec.Selector, pod.Labels)
	}
	webhookPort, _ := containerPort(c, "webhook")
	if len(svc.Spec.Ports) != 1 {
		t.Fatalf("Service ports = %+v, want one", svc.Spec.Ports)
	}
	sp := svc.Spec.Ports[0]
	target := sp.TargetPort
	if target.Type == intstr.String {
		p, ok := containerPort(c, target.StrVal)
		if !ok {
			t.Errorf("Service targets port %q, which the container does not name", target.StrVal)
		}
		target = intstr.FromInt32(p)
	}
	if target.IntVal != webhookPort || webhookPort == 0 || sp.Port != 443 {
		t.Errorf("Service port %d → %d, want 443 → the webhook's container port %d", sp.Port, target.IntVal, webhookPort)
	}

	// The PodDisruptionBudget keeps one replica.
	pdb := find[*policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget", controllerName)
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 {
		t.Errorf("PodDisruptionBudget minAvailable = %v, want 1", pdb.Spec.MinAvailable)
	}
	if sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err != nil || !sel.Matches(labels.Set(pod.Labels)) {
		t.Errorf("PodDisruptionBudget selector %v does not select the pods (%v)", pdb.Spec.Selector, err)
	}
	_ = find[*corev1.Namespace](t, objs, "Namespace", deployNamespace)
}

func isTrue(b *bool) bool { return b != nil && *b }

// TestDeployTokenWebhookKubeconfig checks kube-apiserver's webhook configuration: a
// kubeconfig without unknown fields, one cluster, served over HTTPS at /authenticate,
// with a CA to verify it.
func TestDeployTokenWebhookKubeconfig(t *testing.T) {
	path := filepath.Join(deployDir, "apiserver", "token-webhook.kubeconfig")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var strict clientcmdv1.Config
	if err := decodeStrict(data, &strict); err != nil {
		t.Errorf("%s: %v", path, err)
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(cfg.Clusters) != 1 {
		t.Fatalf("%s has %d clusters, want 1", path, len(cfg.Clusters))
	}
	for name, cl := range cfg.Clusters {
		u, err := url.Parse(cl.Server)
		if err != nil {
			t.Errorf("cluster %s: server %q: %v", name, cl.Server, err)
			continue
		}
		if u.Scheme != "https" || u.Path != "/authenticate" || u.Host == "" {
			t.Errorf("cluster %s: server %q, want https://HOST[:PORT]/authenticate", name, cl.Server)
		}
		if cl.CertificateAuthority == "" && len(cl.CertificateAuthorityData) == 0 {
			t.Errorf("cluster %s has no certificate-authority", name)
		}
		if cl.InsecureSkipTLSVerify {
			t.Errorf("cluster %s skips TLS verification", name)
		}
	}
	ctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok {
		t.Fatalf("current-context %q is not a context", cfg.CurrentContext)
	}
	if _, ok := cfg.Clusters[ctx.Cluster]; !ok {
		t.Errorf("context %s names cluster %q, which is not defined", cfg.CurrentContext, ctx.Cluster)
	}
	user, ok := cfg.AuthInfos[ctx.AuthInfo]
	if !ok {
		t.Fatalf("context %s names user %q, which is not defined", cfg.CurrentContext, ctx.AuthInfo)
	}
	// The webhook requires a client certificate (--webhook-client-ca-file).
	if (user.ClientCertificate == "" && len(user.ClientCertificateData) == 0) || (user.ClientKey == "" && len(user.ClientKeyData) == 0) {
		t.Errorf("user %s has no client certificate and key: the webhook refuses the TLS handshake", ctx.AuthInfo)
	}
}

// TestDeployNetworkPolicy: a NetworkPolicy selects the controller's pods, restricts their
// ingress, and admits the webhook port only from IP blocks (the control plane's
// addresses), never from every source, a pod or a namespace selector.
func TestDeployNetworkPolicy(t *testing.T) {
	objs := loadDeploy(t)
	dep := find[*appsv1.Deployment](t, objs, "Deployment", controllerName)
	np := find[*networkingv1.NetworkPolicy](t, objs, "NetworkPolicy", webhookService)
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil || !sel.Matches(labels.Set(dep.Spec.Template.Labels)) {
		t.Fatalf("the NetworkPolicy's podSelector %v does not select the controller's pods (%v)", np.Spec.PodSelector, err)
	}
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
		t.Errorf("policyTypes %v lack Ingress", np.Spec.PolicyTypes)
	}
	webhookPort := false
	for i, rule := range np.Spec.Ingress {
		covers := len(rule.Ports) == 0
		for _, p := range rule.Ports {
			if p.Port == nil || *p.Port == intstr.FromString("webhook") || *p.Port == intstr.FromInt32(21362) {
				covers = true
			}
		}
		if !covers {
			continue
		}
		webhookPort = true
		if len(rule.From) == 0 {
			t.Errorf("ingress[%d] admits every source to the webhook port", i)
		}
		for _, peer := range rule.From {
			if peer.IPBlock == nil || peer.PodSelector != nil || peer.NamespaceSelector != nil {
				t.Errorf("ingress[%d] admits %+v to the webhook port; want only the control plane's IP blocks", i, peer)
				continue
			}
			if _, _, err := net.ParseCIDR(peer.IPBlock.CIDR); err != nil || peer.IPBlock.CIDR == "0.0.0.0/0" || peer.IPBlock.CIDR == "::/0" {
				t.Errorf("ingress[%d]: ipBlock %q is not a control plane's range (%v)", i, peer.IPBlock.CIDR, err)
			}
		}
	}
	if !webhookPort {
		t.Error("no ingress rule admits the API server to the webhook port")
	}
}
