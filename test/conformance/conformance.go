// Package conformance runs upstream Kubernetes conformance tests (the e2e.test binary that
// `make tools` builds from the pinned k8s.io/kubernetes) against a local nodejoin cluster.
//
// The tests to run live in one file, focus.yaml: the focused tests by exact name and the
// conformance tests left out, each with its reason. This package reads that file, turns it
// into e2e.test's Ginkgo flags, and reads the JUnit report e2e.test writes into counts of
// passed, failed and skipped tests. The tests of this package start the cluster and run
// e2e.test: TestConformanceSubset (part of `make test`) and TestConformance (`make
// conformance`).
package conformance

import (
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/nodejoin/nodejoin/internal/strictyaml"
)

// List is the content of focus.yaml.
type List struct {
	// Focus lists the tests to run, each by its exact name.
	Focus []Test `json:"focus"`
	// Skip lists conformance tests left out, each with its reason.
	Skip []Skip `json:"skip"`
}

// Test is one focused test.
type Test struct {
	// Name is the test's full name: the codename of the conformance list, which is also
	// the JUnit test name after "[It] ".
	Name string `json:"name"`
	// Needs names the images and cluster parts the test uses (documentation only).
	Needs string `json:"needs,omitempty"`
	// Subset marks the tests `make test` runs too.
	Subset bool `json:"subset,omitempty"`
}

// Skip is one left-out test (Name) or group of tests (Match, a Go regular expression).
type Skip struct {
	Name   string `json:"name,omitempty"`
	Match  string `json:"match,omitempty"`
	Reason string `json:"reason"`
}

// Load reads and checks a focus file: every focus entry has a name and appears once, every
// skip has exactly one of name or match (a valid expression) and a reason, and no focused
// test is also skipped.
func Load(path string) (*List, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the focus file: %w", err)
	}
	var l List
	if _, err := strictyaml.Decode(data, path, &l, strictyaml.Options{}); err != nil {
		return nil, err
	}
	if err := l.check(); err != nil {
		return nil, fmt.Errorf("focus file %s: %w", path, err)
	}
	return &l, nil
}

func (l *List) check() error {
	if len(l.Focus) == 0 {
		return errors.New("no test in focus")
	}
	seen := map[string]bool{}
	var errs []error
	for i, t := range l.Focus {
		switch {
		case strings.TrimSpace(t.Name) == "":
			errs = append(errs, fmt.Errorf("focus[%d]: name is empty", i))
		case t.Name != strings.Join(strings.Fields(t.Name), " "):
			errs = append(errs, fmt.Errorf("focus[%d] %q: extra white space in the name", i, t.Name))
		case seen[t.Name]:
			errs = append(errs, fmt.Errorf("focus[%d] %q: listed twice", i, t.Name))
		}
		seen[t.Name] = true
	}
	for i, s := range l.Skip {
		what := s.Name + s.Match
		switch {
		case (s.Name == "") == (s.Match == ""):
			errs = append(errs, fmt.Errorf("skip[%d]: give exactly one of name and match", i))
		case strings.TrimSpace(s.Reason) == "":
			errs = append(errs, fmt.Errorf("skip[%d] %q: no reason given", i, what))
		}
		if s.Match != "" {
			re, err := regexp.Compile(s.Match)
			if err != nil {
				errs = append(errs, fmt.Errorf("skip[%d] match %q: %w", i, s.Match, err))
				continue
			}
			for _, t := range l.Focus {
				if re.MatchString(t.Name) {
					errs = append(errs, fmt.Errorf("skip[%d] match %q also matches the focused test %q", i, s.Match, t.Name))
				}
			}
		} else if seen[s.Name] {
			errs = append(errs, fmt.Errorf("skip[%d] %q is also in focus", i, s.Name))
		}
	}
	return errors.Join(errs...)
}

// Names returns the focused tests' names; with subset, only those marked subset.
func (l *List) Names(subset bool) []string {
	var names []string
	for _, t := range l.Focus {
		if !subset || t.Subset {
			names = append(names, t.Name)
		}
	}
	return names
}

// FocusRegexp returns a --ginkgo.focus expression that selects exactly the named tests.
// Ginkgo matches it against "<suite description> <test name>"; test names start with
// "[sig-", the suite description has no "[", so the name must follow the first space
// before any "[".
func FocusRegexp(names []string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = regexp.QuoteMeta(n)
	}
	return exact + "(?:" + strings.Join(quoted, "|") + ")$"
}

// exact starts an expression that must match a whole test name (see FocusRegexp).
const exact = `^[^\[]* `

// SkipRegexp returns a --ginkgo.skip expression that matches every skipped test, or ""
// when nothing is skipped.
func (l *List) SkipRegexp() string {
	var parts []string
	for _, s := range l.Skip {
		if s.Name != "" {
			parts = append(parts, exact+regexp.QuoteMeta(s.Name)+"$")
		} else {
			parts = append(parts, s.Match)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "(?:" + strings.Join(parts, ")|(?:") + ")"
}

// Result holds the outcome of each test of a run, by name.
type Result struct {
	Passed, Failed, Skipped []string
	// Flaky are the tests that failed, then passed when run again (see Rerun); they are
	// among Passed, and their first failure stays in Failures.
	Flaky []string
	// Failures maps a failed test to the failure message of the report.
	Failures map[string]string
}

func (r Result) String() string {
	s := fmt.Sprintf("%d passed, %d failed, %d skipped", len(r.Passed), len(r.Failed), len(r.Skipped))
	if len(r.Flaky) > 0 {
		s += fmt.Sprintf(" (%d of the passed flaky: failed, then passed on the rerun)", len(r.Flaky))
	}
	return s
}

// Rerun merges the result of running first's failed tests once more: a test that passes
// the second time moves to Passed and is listed in Flaky, never hidden; one that fails
// again stays failed, with its second failure; one the rerun skipped stays failed.
func Rerun(first, second Result) Result {
	passed := map[string]bool{}
	for _, n := range second.Passed {
		passed[n] = true
	}
	r := Result{
		Passed:   slices.Clone(first.Passed),
		Skipped:  slices.Clone(first.Skipped),
		Flaky:    slices.Clone(first.Flaky),
		Failures: map[string]string{},
	}
	for _, n := range first.Failed {
		switch {
		case passed[n]:
			r.Passed = append(r.Passed, n)
			r.Flaky = append(r.Flaky, n)
			r.Failures[n] = first.Failures[n]
		case second.Failures[n] != "":
			r.Failed = append(r.Failed, n)
			r.Failures[n] = second.Failures[n]
		default:
			r.Failed = append(r.Failed, n)
			r.Failures[n] = first.Failures[n]
		}
	}
	sort.Strings(r.Passed)
	sort.Strings(r.Flaky)
	sort.Strings(r.Failed)
	return r
}

type junitSuites struct {
	Suites []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Cases []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name    string        `xml:"name,attr"`
	Status  string        `xml:"status,attr"`
	Failure *junitMessage `xml:"failure"`
	Error   *junitMessage `xml:"error"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// ReadJUnit reads the JUnit report e2e.test wrote (--report-dir) and returns the outcome
// of the named tests. A test counts as skipped when it was skipped at run time (the
// framework skips tests whose prerequisites are missing). When the suite's setup
// ([SynchronizedBeforeSuite]: nodes schedulable, kube-system ready) failed or timed out,
// every named test that did not pass counts as failed with the setup's failure: the
// report then lists no test at all. Tests not named are ignored: the report lists every
// test of the suite, filtered-out ones as skipped.
func ReadJUnit(path string, names []string) (Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Result{}, fmt.Errorf("reading the JUnit report: %w", err)
	}
	var doc junitSuites
	if err := xml.Unmarshal(data, &doc); err != nil {
		return Result{}, fmt.Errorf("parsing the JUnit report %s: %w", path, err)
	}
	status := map[string]junitCase{}
	var setupFailure string
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			if name, ok := strings.CutPrefix(c.Name, "[It] "); ok {
				status[name] = c
			} else if isSetup(c.Name) && c.Status != "passed" && c.Status != "skipped" {
				if setupFailure == "" {
					setupFailure = c.Name + ": " + message(c)
				}
			}
		}
	}
	r := Result{Failures: map[string]string{}}
	for _, n := range names {
		c, ok := status[n]
		switch {
		case !ok && setupFailure != "":
			r.Failed = append(r.Failed, n)
			r.Failures[n] = setupFailure
		case !ok:
			return Result{}, fmt.Errorf("the JUnit report %s has no test named %q: is the name in focus.yaml exact?", path, n)
		case c.Status == "passed":
			r.Passed = append(r.Passed, n)
		case c.Status == "skipped" && setupFailure != "":
			r.Failed = append(r.Failed, n)
			r.Failures[n] = setupFailure
		case c.Status == "skipped" || c.Status == "pending":
			r.Skipped = append(r.Skipped, n)
		default:
			r.Failed = append(r.Failed, n)
			r.Failures[n] = message(c)
		}
	}
	sort.Strings(r.Passed)
	sort.Strings(r.Failed)
	sort.Strings(r.Skipped)
	return r, nil
}

// Selected returns the tests a report lists as passed: after a dry run (which passes
// every selected test and lists the others as skipped), the tests the run's flags select.
func Selected(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the JUnit report: %w", err)
	}
	var doc junitSuites
	if err := xml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("parsing the JUnit report %s: %w", path, err)
	}
	var names []string
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			if name, ok := strings.CutPrefix(c.Name, "[It] "); ok && c.Status == "passed" {
				names = append(names, name)
			}
		}
	}
	sort.Strings(names)
	return names, nil
}

// isSetup tells whether a JUnit test case is the suite's setup, which runs before every test.
func isSetup(name string) bool {
	return strings.HasPrefix(name, "[SynchronizedBeforeSuite]") || strings.HasPrefix(name, "[BeforeSuite]")
}

// message returns a failed test case's message: the message attribute, else the first
// line of the failure's text (Ginkgo leaves the attribute empty on timeouts), else the
// status.
func message(c junitCase) string {
	for _, m := range []*junitMessage{c.Failure, c.Error} {
		switch {
		case m == nil:
		case m.Message != "":
			return m.Message
		case strings.TrimSpace(m.Text) != "":
			first, _, _ := strings.Cut(strings.TrimSpace(m.Text), "\n")
			return first
		}
	}
	return c.Status
}

// GinkgoArgs returns the arguments of the ginkgo CLI that runs e2e.test with args (from
// Args) in procs parallel processes. The CLI takes the --ginkgo.* flags as its own, before
// the binary, and passes the rest to every process after "--". Upstream marks the tests
// that must run alone [Serial] with Ginkgo's Serial decorator: the CLI runs them last, on
// process 1, once every parallel test is done.
func GinkgoArgs(e2e string, procs int, args []string) []string {
	own := []string{fmt.Sprintf("--procs=%d", procs)}
	var rest []string
	for _, a := range args {
		if f, ok := strings.CutPrefix(a, "--ginkgo."); ok {
			own = append(own, "--"+f)
		} else {
			rest = append(rest, a)
		}
	}
	return append(append(own, e2e, "--"), rest...)
}

// Args returns e2e.test's arguments for a run of the named tests (all conformance tests
// but the skipped ones when names is empty) that writes its JUnit report into reportDir.
func (l *List) Args(names []string, kubeconfig, kubectl, reportDir, timeout string) []string {
	args := []string{
		"--provider=local",
		"--kubeconfig=" + kubeconfig,
		"--kubectl-path=" + kubectl,
		"--report-dir=" + reportDir,
		"--ginkgo.timeout=" + timeout,
		"--ginkgo.no-color",
		// log-dump.sh of the upstream repository does not exist here.
		"--disable-log-dump",
	}
	if len(names) > 0 {
		args = append(args, "--ginkgo.focus="+FocusRegexp(slices.Sorted(slices.Values(names))))
	} else {
		args = append(args, "--ginkgo.label-filter=Conformance")
	}
	if skip := l.SkipRegexp(); skip != "" {
		args = append(args, "--ginkgo.skip="+skip)
	}
	return args
}
