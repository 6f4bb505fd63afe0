package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nodejoin/nodejoin/internal/process"
)

// replica is one nodejoin-controller process run against the benchmark's cluster. It
// runs as a child process, not in this one, so that its CPU time and memory are its
// own and not the simulated kubelets'.
type replica struct {
	id         string
	proc       *process.Process
	metricsURL string
	healthURL  string
	pprofURL   string
	cpuProfile string

	// cpuAtBurst is the process's CPU seconds when the burst started; final holds the
	// last reading (taken before the process ends).
	cpuAtBurst float64
	final      procStats
	killed     bool
}

// replicaSpec says how to run one replica.
type replicaSpec struct {
	id          string
	leaderElect bool
	webhook     string // address to serve the token webhook on; "" for none
	profileDir  string
}

// freeAddr picks a free loopback port. Another process could take it before the
// controller binds it; on this benchmark's own machine that is unlikely, and a taken
// port fails the run with the controller's error rather than measuring anything wrong.
func freeAddr() (string, error) {
	var lc net.ListenConfig
	l, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("picking a free loopback port: %w", err)
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

// startReplica starts nodejoin-controller run and waits until it is ready.
func (r *run) startReplica(ctx context.Context, spec replicaSpec) (*replica, error) {
	metrics, err := freeAddr()
	if err != nil {
		return nil, err
	}
	health, err := freeAddr()
	if err != nil {
		return nil, err
	}
	p := r.cluster.PKI()
	argv := []string{r.opts.ControllerBin, "run",
		"--kubeconfig", r.cluster.KubeconfigPath(),
		"--ca-cert", p.CA.Cert, "--ca-key", p.CA.Key,
		"--inventory-source", "ec2", "--aws-region", region,
		"--ec2-endpoint", r.cloud.EC2URL, "--iam-endpoint", r.cloud.IAMURL,
		"--metrics-bind-address", metrics, "--health-probe-bind-address", health,
		"--token-cleanup-interval", "0",
		"--identity", spec.id,
		// The cluster whose tag bootstrap-token instances must carry.
		"--cluster-id", r.cluster.Name(),
		"--leader-elect=" + strconv.FormatBool(spec.leaderElect),
	}
	if r.opts.CSRWorkers > 0 {
		argv = append(argv, "--csr-workers", strconv.Itoa(r.opts.CSRWorkers))
	}
	if spec.leaderElect {
		// Shorter than the defaults (15s/10s/2s) so that a successor takes over within
		// seconds of a killed leader; long enough not to lose the Lease under load.
		argv = append(argv, "--leader-election-lease-duration", "8s",
			"--leader-election-renew-deadline", "6s", "--leader-election-retry-period", "1s")
	}
	if r.approver == BaselineKCM {
		// kube-controller-manager approves and signs client certificates.
		argv = append(argv, "--csr-signers", "kubernetes.io/kubelet-serving")
	}
	argv = append(argv, r.opts.ControllerArgs...)
	if r.opts.CertificateLifetime > 0 {
		d := r.opts.CertificateLifetime.String()
		argv = append(argv, "--duration", d, "--client-cert-max-duration", d)
	}
	if spec.webhook != "" {
		argv = append(argv, "--webhook-listen", spec.webhook,
			"--tls-cert", p.TokenWebhook.Cert, "--tls-key", p.TokenWebhook.Key,
			"--webhook-client-ca-file", p.TokenWebhookClientCA,
			"--sts-host", strings.TrimPrefix(r.cloud.STSURL, "https://"), "--sts-ca-bundle", r.cluster.CAFile())
	}
	rep := &replica{id: spec.id, metricsURL: "http://" + metrics + "/metrics", healthURL: "http://" + health + "/readyz"}
	if spec.profileDir != "" {
		pprofAddr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		rep.pprofURL = "http://" + pprofAddr + "/debug/pprof/"
		rep.cpuProfile = filepath.Join(spec.profileDir, r.label+"-"+spec.id+".cpu.pprof")
		argv = append(argv, "--pprof-bind-address", pprofAddr, "--cpu-profile", rep.cpuProfile)
	}
	creds, err := r.cloud.ControllerConfig(region).Credentials.Retrieve(ctx)
	if err != nil {
		return nil, err
	}
	env := []string{
		// The local cloud's controller credentials, and nothing of the host's.
		"AWS_ACCESS_KEY_ID=" + creds.AccessKeyID, "AWS_SECRET_ACCESS_KEY=" + creds.SecretAccessKey,
		"AWS_SESSION_TOKEN=", "AWS_PROFILE=", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"AWS_EC2_METADATA_DISABLED=true", "AWS_REGION=" + region,
		"AWS_WEB_IDENTITY_TOKEN_FILE=", "AWS_ROLE_ARN=", "AWS_CONTAINER_CREDENTIALS_FULL_URI=", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI=",
		"KUBECONFIG=",
	}
	env = append(env, r.opts.ControllerEnv...)
	rep.proc, err = process.Start(process.Spec{Name: "nodejoin-controller-" + spec.id, Argv: argv, Env: env,
		LogFile: filepath.Join(r.dir, "nodejoin-controller-"+spec.id+".log")})
	if err != nil {
		return nil, err
	}
	if err := waitReady(ctx, rep); err != nil {
		rep.proc.Stop(5 * time.Second)
		return nil, err
	}
	return rep, nil
}

// waitReady polls the replica's /readyz.
func waitReady(ctx context.Context, rep *replica) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, rep.healthURL, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-rep.proc.Done():
			return fmt.Errorf("nodejoin-controller %s exited while starting: %w (log: %s)\n%s", rep.id, rep.proc.Err(), rep.proc.LogFile(), rep.proc.LogTail(20))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nodejoin-controller %s not ready after 2 minutes (log: %s)", rep.id, rep.proc.LogFile())
		}
	}
}

// procStats is what /proc says of a process.
type procStats struct {
	cpuSeconds float64 // user + system
	rssMiB     float64 // current resident set
	peakMiB    float64 // VmHWM: the largest resident set so far
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux architecture Go supports (it is fixed in the kernel ABI, whatever CONFIG_HZ is).
const clockTicks = 100

// readProc reads a process's CPU time and memory from /proc.
func readProc(pid int) (procStats, error) {
	var st procStats
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return st, err
	}
	// The command name (field 2) is in parentheses and may hold spaces: fields count
	// from after the last ')'.
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return st, errors.New("malformed /proc stat")
	}
	f := strings.Fields(string(stat[i+1:]))
	// f[0] is field 3 (state): utime is field 14, stime field 15.
	if len(f) < 13 {
		return st, errors.New("short /proc stat")
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err := errors.Join(err1, err2); err != nil {
		return st, fmt.Errorf("reading CPU times of process %d: %w", pid, err)
	}
	st.cpuSeconds = (utime + stime) / clockTicks
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return st, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		if err != nil {
			continue
		}
		switch k {
		case "VmHWM":
			st.peakMiB = kb / 1024
		case "VmRSS":
			st.rssMiB = kb / 1024
		}
	}
	return st, nil
}

// sample reads the replica's /proc figures, keeping them as its last.
func (rep *replica) sample() procStats {
	if st, err := readProc(rep.proc.PID()); err == nil {
		rep.final = st
	}
	return rep.final
}

// fetch GETs a URL of the replica's and returns the body.
func fetch(ctx context.Context, url string) ([]byte, error) {
	return fetchWith(ctx, http.DefaultClient, url)
}

// fetchWith is fetch with a client of the caller's (credentials, a CA).
func fetchWith(ctx context.Context, hc *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return io.ReadAll(resp.Body)
}
