package conformance

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/nodejoin/nodejoin/internal/toolbin"
)

var (
	full      = flag.Bool("conformance", false, "run TestConformance: the whole focus list on a fresh two-node cluster (make conformance)")
	focusMode = flag.String("focus", "list", `what TestConformance runs: "list" (the focus list) or "all" (every conformance test but the skipped ones)`)
	artifacts = flag.String("artifacts", "", "directory for the JUnit report, e2e.test's log and the cluster's logs (default: <repo>/_artifacts/<test>)")
	timeout   = flag.String("e2e-timeout", "3h", "e2e.test's --ginkgo.timeout for TestConformance")
	match     = flag.String("match", "", "with -focus=all, only the conformance tests whose name matches this Go regular expression (a chunk of the suite); the skip list still applies")
	procs     = flag.Int("procs", 1, "parallel e2e.test processes (through bin/ginkgo) for TestConformance; [Serial] tests run last, alone")
	rerun     = flag.Bool("rerun", true, "run TestConformance's failed tests once more; those that pass then are reported as flaky")
	extraImgs = flag.String("images", "", "directory of image archives the tests need beyond the ones every node imports (default: <bin>/images/conformance); each is loaded into the cluster's nodes")
)

const focusFile = "focus.yaml"

func TestFocusFileIsValid(t *testing.T) {
	l, err := Load(focusFile)
	if err != nil {
		t.Fatal(err)
	}
	subset := l.Names(true)
	if n := len(subset); n == 0 || n > 12 {
		t.Errorf("the subset `make test` runs has %d tests, want a few (1 to 12)", n)
	}
	for _, n := range subset {
		if !slices.Contains(l.Names(false), n) {
			t.Errorf("subset test %q is not in the focus list", n)
		}
	}
}

func TestLoadRejects(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"empty focus", "focus: []\n", "no test in focus"},
		{"unknown field", "focus:\n- name: a\n  title: b\n", `line 3: field focus[0].title: unknown field`},
		{"empty name", "focus:\n- name: ''\n", "name is empty"},
		{"white space", "focus:\n- name: 'a  b'\n", "extra white space"},
		{"twice", "focus:\n- name: a\n- name: a\n", "listed twice"},
		{"skip without reason", "focus:\n- name: a\nskip:\n- name: b\n", "no reason"},
		{"skip with name and match", "focus:\n- name: a\nskip:\n- name: b\n  match: c\n  reason: r\n", "exactly one of name and match"},
		{"skip of a focused test", "focus:\n- name: a\nskip:\n- name: a\n  reason: r\n", "also in focus"},
		{"skip matching a focused test", "focus:\n- name: abc\nskip:\n- match: b\n  reason: r\n", "also matches the focused test"},
		{"bad expression", "focus:\n- name: a\nskip:\n- match: '('\n  reason: r\n", "missing closing )"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "focus.yaml")
			if err := os.WriteFile(p, []byte(tt.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Load(p)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Load = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// Ginkgo matches --ginkgo.focus and --ginkgo.skip against "<suite description> <name>".
func TestRegexpsSelectExactNames(t *testing.T) {
	names := []string{
		"[sig-node] Pods should get a host IP [Conformance] [NodeConformance]",
		`[sig-node] Probing container should be restarted with a exec "cat /tmp/health" liveness probe [Conformance] [NodeConformance]`,
	}
	focus := regexp.MustCompile(FocusRegexp(names))
	l := &List{Skip: []Skip{{Name: "[sig-x] A (b) [Conformance]", Reason: "r"}, {Match: "Update Demo", Reason: "r"}}}
	skip := regexp.MustCompile(l.SkipRegexp())
	tests := []struct {
		text        string
		focus, skip bool
	}{
		{"Kubernetes e2e suite " + names[0], true, false},
		{"Kubernetes e2e suite " + names[1], true, false},
		{"Kubernetes e2e suite " + strings.TrimSuffix(names[0], " [NodeConformance]"), false, false},
		{"Kubernetes e2e suite [sig-x] " + names[0], false, false},
		{"Kubernetes e2e suite " + names[0] + " [Serial]", false, false},
		{"Kubernetes e2e suite [sig-x] A (b) [Conformance]", false, true},
		{"Kubernetes e2e suite [sig-x] A b [Conformance]", false, false},
		{"Kubernetes e2e suite [sig-cli] Kubectl client Update Demo should scale [Conformance]", false, true},
	}
	for _, tt := range tests {
		if got := focus.MatchString(tt.text); got != tt.focus {
			t.Errorf("focus matches %q: %v, want %v", tt.text, got, tt.focus)
		}
		if got := skip.MatchString(tt.text); got != tt.skip {
			t.Errorf("skip matches %q: %v, want %v", tt.text, got, tt.skip)
		}
	}
	if got := (&List{}).SkipRegexp(); got != "" {
		t.Errorf("SkipRegexp without skips = %q, want empty", got)
	}
}

func TestReadJUnit(t *testing.T) {
	const (
		hostIP = "[sig-node] Pods should get a host IP [Conformance] [NodeConformance]"
		lease  = "[sig-node] Lease lease API should be available [Conformance]"
		dns    = "[sig-network] DNS should provide DNS for services [Conformance]"
	)
	tests := []struct {
		file     string
		names    []string
		want     string
		failures map[string]string
		err      string
	}{
		{"junit_failed.xml", []string{hostIP, lease, dns}, "1 passed, 1 failed, 1 skipped",
			map[string]string{lease: "leases.coordination.k8s.io is forbidden"}, ""},
		{"junit_failed.xml", []string{hostIP}, "1 passed, 0 failed, 0 skipped", map[string]string{}, ""},
		// A real report: the suite timed out waiting for schedulable nodes (no
		// kube-controller-manager lifted the not-ready taint).
		{"junit_setup_timedout.xml", []string{hostIP, lease}, "0 passed, 2 failed, 0 skipped",
			map[string]string{hostIP: "[SynchronizedBeforeSuite]: [TIMEDOUT] A suite timeout occurred", lease: "[SynchronizedBeforeSuite]: [TIMEDOUT] A suite timeout occurred"}, ""},
		{"junit_failed.xml", []string{"[sig-node] Pods should get a host IP [Conformance]"}, "", nil, "has no test named"},
		{"missing.xml", []string{hostIP}, "", nil, "reading the JUnit report"},
	}
	for _, tt := range tests {
		r, err := ReadJUnit(filepath.Join("testdata", tt.file), tt.names)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: err = %v, want %q", tt.file, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tt.file, err)
		}
		if r.String() != tt.want {
			t.Errorf("%s %d names: %s, want %s", tt.file, len(tt.names), r, tt.want)
		}
		if fmt.Sprint(r.Failures) != fmt.Sprint(tt.failures) {
			t.Errorf("%s: failures %v, want %v", tt.file, r.Failures, tt.failures)
		}
	}
}

// e2eTest returns the pinned e2e.test, skipping (failing in CI) when `make tools` has not
// built it.
func e2eTest(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs e2e.test: skipped with -short")
	}
	p, err := toolbin.Find(toolbin.Dir(), "e2e.test")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI needs e2e.test (make tools): %v", err)
		}
		t.Skipf("skipping: %v (make tools builds it)", err)
	}
	return p
}

// Every name in the focus file is a conformance test of the pinned release, and every
// skip entry names or matches at least one.
func TestFocusListNamesExist(t *testing.T) {
	e2e := e2eTest(t)
	l, err := Load(focusFile)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), e2e, "--list-conformance-tests").Output()
	if err != nil {
		t.Fatalf("e2e.test --list-conformance-tests: %v", err)
	}
	var list []struct {
		Codename string `json:"codename"`
	}
	if err := yaml.Unmarshal(out, &list); err != nil {
		t.Fatalf("parsing e2e.test --list-conformance-tests: %v", err)
	}
	var known []string
	for _, c := range list {
		known = append(known, strings.Join(strings.Fields(c.Codename), " "))
	}
	if len(known) < 100 {
		t.Fatalf("e2e.test lists %d conformance tests, want hundreds", len(known))
	}
	for _, n := range l.Names(false) {
		if !slices.Contains(known, n) {
			t.Errorf("focus: %q is not a conformance test of this e2e.test", n)
		}
	}
	for _, s := range l.Skip {
		if s.Name != "" && !slices.Contains(known, s.Name) {
			t.Errorf("skip: %q is not a conformance test of this e2e.test", s.Name)
		}
		if s.Match != "" && !slices.ContainsFunc(known, regexp.MustCompile(s.Match).MatchString) {
			t.Errorf("skip: match %q matches no conformance test of this e2e.test", s.Match)
		}
	}
}

// A dry run of the focus list selects exactly its tests, and the JUnit report e2e.test
// writes reads back with every one of them.
func TestDryRunSelectsTheFocusList(t *testing.T) {
	e2e := e2eTest(t)
	l, err := Load(focusFile)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	names := l.Names(false)
	args := append(l.Args(names, filepath.Join(dir, "no-kubeconfig"), "kubectl", dir, "10m"), "--ginkgo.dry-run")
	out, err := exec.CommandContext(t.Context(), e2e, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("e2e.test dry run: %v\n%s", err, tail(out))
	}
	if want := fmt.Sprintf("Ran %d of ", len(names)); !bytes.Contains(out, []byte(want)) {
		t.Errorf("dry run output lacks %q:\n%s", want, tail(out))
	}
	r, err := ReadJUnit(filepath.Join(dir, "junit_01.xml"), names)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Passed) != len(names) {
		t.Errorf("dry run: %s, want all %d passed (dry runs pass every selected test)", r, len(names))
	}
}

// TestConformanceSubset runs the subset of the focus list (a few tests without pods and a
// few simple pod tests) on a fresh one-node cluster: part of `make test`. It needs root
// and the packages of `make deps`; on this project's shared machines run it under the
// e2e lock.
func TestConformanceSubset(t *testing.T) {
	l, err := Load(focusFile)
	if err != nil {
		t.Fatal(err)
	}
	// The subset runs no test that needs the conformance-only images: none are loaded.
	run(t, l, "conformance-subset", 1, l.Names(true), "20m", false) // inside make test's 30m per package
}

// TestConformance runs the whole focus list (or, with -focus=all, every conformance test
// but the skipped ones) on a fresh two-node cluster: `make conformance`.
func TestConformance(t *testing.T) {
	if !*full {
		t.Skip("run by make conformance (go test -run TestConformance ./test/conformance -args -conformance)")
	}
	l, err := Load(focusFile)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	switch *focusMode {
	case "list":
		if *match != "" {
			t.Fatal("-match selects among all conformance tests: give -focus=all with it")
		}
		names = l.Names(false)
	case "all":
		// Named exactly, like the focus list's, so that the report is read the same way
		// and a failure is run once more.
		names = selectMatching(t, l, *match)
	default:
		t.Fatalf(`-focus %q: want "list" or "all"`, *focusMode)
	}
	run(t, l, "conformance", 2, names, *timeout, true)
}

// selectMatching returns the conformance tests, but the skipped ones, whose name matches
// expr (all of them for ""): what a dry run of e2e.test selects with it. The run then names them exactly, so
// its report is read like the focus list's.
func selectMatching(t *testing.T, l *List, expr string) []string {
	t.Helper()
	if _, err := regexp.Compile(expr); err != nil {
		t.Fatalf("-match %q: %v", expr, err)
	}
	e2e := e2eTest(t)
	dir := t.TempDir()
	args := append(l.Args(nil, filepath.Join(dir, "no-kubeconfig"), "kubectl", dir, "10m"), "--ginkgo.dry-run")
	if expr != "" {
		args = append(args, "--ginkgo.focus="+expr)
	}
	if out, err := exec.CommandContext(t.Context(), e2e, args...).CombinedOutput(); err != nil {
		t.Fatalf("e2e.test dry run of -match %q: %v\n%s", expr, err, tail(out))
	}
	names, err := Selected(filepath.Join(dir, "junit_01.xml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatalf("-match %q selects no conformance test outside the skip list", expr)
	}
	t.Logf("-match %q selects %d test(s)", expr, len(names))
	return names
}

// run starts a cluster of nodes real nodes with bin/nodejoin, runs e2e.test on the named
// tests (each failure once more, reported as flaky if it then passes), prints the counts,
// fails the test for each failed one, and removes the cluster. With extraImages it loads
// the conformance-only images into the nodes first.
func run(t *testing.T, l *List, cluster string, nodes int, names []string, timeout string, extraImages bool) {
	e2eTest(t) // skips without bin/e2e.test, before any cluster starts
	requireRealNodes(t)
	bin := toolbin.Dir()
	nodejoin, err := toolbin.Find(bin, "nodejoin")
	if err != nil {
		t.Skipf("skipping: %v (make build)", err)
	}
	kubectl, err := toolbin.Find(bin, toolbin.Kubectl)
	if err != nil {
		t.Skipf("skipping: %v (make tools)", err)
	}
	out := *artifacts
	if out == "" {
		root, err := toolbin.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		out = filepath.Join(root, "_artifacts", strings.ToLower(strings.TrimPrefix(t.Name(), "Test")))
	}
	if err := os.RemoveAll(out); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("artifacts: %s", out)

	// Cleanup runs after t.Context() is canceled: export and down get a context of their own.
	nj := func(ctx context.Context, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, nodejoin, args...)
		cmd.Env = append(os.Environ(), toolbin.EnvDir+"="+bin)
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	t.Logf("starting cluster %s with %d real node(s)", cluster, nodes)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if t.Failed() {
			if o, err := nj(ctx, "export", "logs", "--name", cluster, filepath.Join(out, "cluster-logs")); err != nil {
				t.Logf("nodejoin export logs: %v\n%s", err, o)
			}
		}
		if o, err := nj(ctx, "down", "--name", cluster); err != nil {
			t.Errorf("nodejoin down --name %s: %v\n%s", cluster, err, o)
		}
	})
	// The runner owns this name: what an interrupted earlier run left of it goes first.
	if o, err := nj(t.Context(), "down", "--name", cluster); err != nil {
		t.Fatalf("nodejoin down --name %s (what an earlier run left): %v\n%s", cluster, err, o)
	}
	if o, err := nj(t.Context(), "up", "--name", cluster, "--nodes", fmt.Sprint(nodes), "--kubelet", "real", "--detach"); err != nil {
		t.Fatalf("nodejoin up: %v\n%s", err, o)
	}
	if extraImages {
		if o, err := loadExtraImages(t.Context(), nj, cluster, bin); err != nil {
			t.Fatalf("loading the conformance images: %v\n%s", err, o)
		}
	}
	kubeconfig, err := nj(t.Context(), "kubeconfig", "--name", cluster)
	if err != nil {
		t.Fatalf("nodejoin kubeconfig: %v\n%s", err, kubeconfig)
	}

	// e2e.test waits up to 30 minutes for schedulable nodes before any test; a cluster
	// that cannot get there fails here, sooner and with the reason.
	kubeconfig = strings.TrimSpace(kubeconfig)
	kc := func(args ...string) (string, error) {
		b, err := exec.CommandContext(t.Context(), kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
		return strings.TrimSpace(string(b)), err
	}
	waitFor(t, "the default ServiceAccount in namespace default (kube-controller-manager creates it)", func() (bool, string) {
		o, err := kc("get", "serviceaccount", "default", "--namespace", "default", "--output", "name")
		return err == nil, o
	})
	waitFor(t, fmt.Sprintf("%d Ready node(s) without taints (kube-controller-manager lifts node.kubernetes.io/not-ready)", nodes), func() (bool, string) {
		o, err := kc("get", "nodes", "--output", `jsonpath={range .items[*]}{.metadata.name} ready={.status.conditions[?(@.type=="Ready")].status} taints={.spec.taints}{"\n"}{end}`)
		if err != nil {
			return false, o
		}
		lines := strings.Split(o, "\n")
		ok := len(lines) == nodes
		for _, l := range lines {
			ok = ok && strings.Contains(l, " ready=True ") && strings.HasSuffix(l, " taints=")
		}
		return ok, o
	})

	r, runErr := runE2E(t, l, names, kubeconfig, kubectl, out, timeout, *procs)
	if runErr != nil && len(r.Failed) == 0 {
		t.Errorf("e2e.test failed although no focused test did: %v (see %s)", runErr, filepath.Join(out, "e2e.log"))
	}
	// A failure is run once more, in one process, on the same cluster: one that
	// passes then is reported as flaky, with its first failure, not counted as passed
	// silently; one that fails again is a failure.
	if *rerun && len(r.Failed) > 0 {
		again := filepath.Join(out, "rerun")
		if err := os.MkdirAll(again, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Logf("running the %d failed test(s) once more", len(r.Failed))
		second, _ := runE2E(t, l, r.Failed, kubeconfig, kubectl, again, timeout, 1)
		r = Rerun(r, second)
	}
	summary := fmt.Sprintf("conformance: %s (JUnit and log in %s)\n", r, out)
	for _, n := range r.Failed {
		summary += fmt.Sprintf("  FAILED  %s\n", n)
	}
	for _, n := range r.Flaky {
		summary += fmt.Sprintf("  flaky   %s (first run: %s)\n", n, firstLine(r.Failures[n]))
	}
	for _, n := range r.Skipped {
		summary += fmt.Sprintf("  skipped %s\n", n)
	}
	if err := os.WriteFile(filepath.Join(out, "summary.txt"), []byte(summary), 0o644); err != nil {
		t.Error(err)
	}
	// The counts go to the terminal as well as the report: `make conformance` prints them.
	_, _ = os.Stdout.WriteString(summary)
	for _, n := range r.Failed {
		t.Errorf("%s: %s", n, firstLine(r.Failures[n]))
	}
}

// runE2E runs e2e.test on the named tests (every conformance test but the skipped ones
// when names is empty), in procs parallel processes through bin/ginkgo when above one,
// with its log in out/e2e.log and its JUnit report in out, and returns the named tests'
// outcome and e2e.test's exit error.
func runE2E(t *testing.T, l *List, names []string, kubeconfig, kubectl, out, timeout string, procs int) (Result, error) {
	t.Helper()
	logPath := filepath.Join(out, "e2e.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = logFile.Close() }()
	var w io.Writer = logFile
	if testing.Verbose() {
		w = io.MultiWriter(logFile, os.Stdout)
	}
	e2e := e2eTest(t)
	args := l.Args(names, kubeconfig, kubectl, out, timeout)
	cmd := exec.CommandContext(t.Context(), e2e, args...)
	if procs > 1 {
		ginkgo, err := toolbin.Find(toolbin.Dir(), "ginkgo")
		if err != nil {
			t.Fatalf("-procs %d needs bin/ginkgo: %v (make tools)", procs, err)
		}
		cmd = exec.CommandContext(t.Context(), ginkgo, GinkgoArgs(e2e, procs, args)...)
	}
	cmd.Stdout, cmd.Stderr = w, w
	t.Logf("running %d test(s): %s", len(names), strings.Join(cmd.Args, " "))
	runErr := cmd.Run()
	var exit *exec.ExitError
	if runErr != nil && !errors.As(runErr, &exit) {
		t.Fatalf("running e2e.test: %v", runErr)
	}
	r, err := ReadJUnit(filepath.Join(out, "junit_01.xml"), names)
	if err != nil {
		t.Fatalf("%v (e2e.test: %v; see %s)", err, runErr, logPath)
	}
	return r, runErr
}

// loadExtraImages loads the archives of -images (default <bin>/images/conformance: the
// images only conformance tests use, which other clusters need not import) into every
// node of the cluster. A missing directory loads nothing: the tests needing those images
// then fail on their image pull, naming the image.
func loadExtraImages(ctx context.Context, nj func(context.Context, ...string) (string, error), cluster, bin string) (string, error) {
	dir := *extraImgs
	if dir == "" {
		dir = filepath.Join(bin, "images", "conformance")
	}
	tars, err := filepath.Glob(filepath.Join(dir, "*.tar"))
	if err != nil || len(tars) == 0 {
		return "", err
	}
	return nj(ctx, append([]string{"image", "load", "--name", cluster}, tars...)...)
}

// waitFor polls ready for up to five minutes, failing the test with what was waited for
// and the last observation when it never holds.
func waitFor(t *testing.T, what string, ready func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		ok, seen := ready()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 5m for %s; last seen:\n%s", what, seen)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("waiting for %s: %v", what, t.Context().Err())
		case <-time.After(2 * time.Second):
		}
	}
}

// requireRealNodes skips unless local instances with real kubelets can run here.
func requireRealNodes(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("conformance needs real kubelets, which need root")
	}
	for _, b := range []string{"containerd", "runc", "nsenter"} {
		if _, err := exec.LookPath(b); err != nil {
			t.Skipf("real kubelets need %s (make deps)", b)
		}
	}
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return first
}

// tail returns the last lines of a command's output for an error message.
func tail(b []byte) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}
