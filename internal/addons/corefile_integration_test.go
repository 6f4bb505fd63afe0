package addons

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/nodejoin/nodejoin/internal/testenv"
	"github.com/nodejoin/nodejoin/internal/toolbin"
)

// The Corefile, served by the locally built CoreDNS (bin/coredns) against a real API
// server: a Service's name resolves to its ClusterIP; a name outside the cluster and an
// unknown reverse name get NXDOMAIN at once (never SERVFAIL, never a forward). Ports
// are moved to free loopback ones and the kubernetes plugin is given a kubeconfig, as
// the test runs outside a pod; nothing else of the Corefile changes.
func TestCorefileWithCoreDNS(t *testing.T) {
	dir := testenv.BinDir(t, "coredns", toolbin.Etcd, toolbin.KubeAPIServer)
	env := testenv.Start(t)
	ctx := t.Context()
	svc, err := env.Client.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	tmp := t.TempDir()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthority: env.Config.CAFile}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{ClientCertificate: env.Config.CertFile, ClientKey: env.Config.KeyFile}
	kc.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "x"
	kubeconfig := filepath.Join(tmp, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	ports := freePorts(t, 4)
	cf := Corefile(DefaultClusterDomain)
	for _, r := range []struct{ old, new string }{
		{":53 ", fmt.Sprintf(":%d ", ports[0])},
		{"health {", fmt.Sprintf("health 127.0.0.1:%d {", ports[1])},
		{"    ready\n", fmt.Sprintf("    ready 127.0.0.1:%d\n", ports[2])},
		{"prometheus :9153", fmt.Sprintf("prometheus 127.0.0.1:%d", ports[3])},
		{"pods insecure", "pods insecure\n        kubeconfig " + kubeconfig},
	} {
		if !strings.Contains(cf, r.old) {
			t.Fatalf("the Corefile has no %q to change for the test:\n%s", r.old, cf)
		}
		cf = strings.ReplaceAll(cf, r.old, r.new)
	}
	if err := os.WriteFile(filepath.Join(tmp, "Corefile"), []byte(cf), 0o644); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(cctx, filepath.Join(dir, "coredns"), "-conf", filepath.Join(tmp, "Corefile"), "-dns.port", fmt.Sprint(ports[0]))
	var out testenv.SyncBuffer
	cmd.Stdout, cmd.Stderr, cmd.Dir = &out, &out, tmp
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("Corefile:\n%s\ncoredns output:\n%s", cf, out.String())
		}
	})

	server := fmt.Sprintf("127.0.0.1:%d", ports[0])
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, server)
	}}
	// CoreDNS answers once its watches have synced.
	var addrs []string
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		addrs, err = r.LookupHost(ctx, "web.default.svc.cluster.local")
		return err == nil, nil
	}); err != nil {
		t.Fatalf("web.default.svc.cluster.local does not resolve: %v (last: %v)", err, addrs)
	}
	if len(addrs) != 1 || addrs[0] != svc.Spec.ClusterIP {
		t.Errorf("web.default.svc.cluster.local = %v, want [%s]", addrs, svc.Spec.ClusterIP)
	}
	if names, err := r.LookupAddr(ctx, svc.Spec.ClusterIP); err != nil || len(names) != 1 || names[0] != "web.default.svc.cluster.local." {
		t.Errorf("reverse of %s = %v, %v", svc.Spec.ClusterIP, names, err)
	}
	for _, name := range []string{"example.com", "nodejoin.invalid", "nothere.default.svc.cluster.local"} {
		_, err := r.LookupHost(ctx, name)
		var de *net.DNSError
		if !errors.As(err, &de) || !de.IsNotFound {
			t.Errorf("%s: %v; want NXDOMAIN", name, err)
		}
	}
	if _, err := r.LookupAddr(ctx, "192.0.2.77"); err == nil {
		t.Error("an address outside the cluster has a reverse name")
	} else if de := (*net.DNSError)(nil); !errors.As(err, &de) || !de.IsNotFound {
		t.Errorf("reverse of an address outside the cluster: %v; want NXDOMAIN", err)
	}
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for range n {
		var lc net.ListenConfig
		l, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return ports
}
