package conformance

import (
	"slices"
	"testing"
)

// A failure that passes when run again is reported as flaky, with its first failure; one
// that fails again stays a failure with the second message; nothing is dropped.
func TestRerun(t *testing.T) {
	first := Result{
		Passed:   []string{"a"},
		Failed:   []string{"b", "c", "d"},
		Skipped:  []string{"e"},
		Failures: map[string]string{"b": "b timed out", "c": "c refused", "d": "d refused"},
	}
	tests := []struct {
		name   string
		second Result
		want   Result
		str    string
	}{
		{
			name:   "one passes the second time",
			second: Result{Passed: []string{"b"}, Failed: []string{"c", "d"}, Failures: map[string]string{"c": "c refused again", "d": "d refused again"}},
			want: Result{
				Passed: []string{"a", "b"}, Failed: []string{"c", "d"}, Skipped: []string{"e"}, Flaky: []string{"b"},
				Failures: map[string]string{"b": "b timed out", "c": "c refused again", "d": "d refused again"},
			},
			str: "2 passed, 2 failed, 1 skipped (1 of the passed flaky: failed, then passed on the rerun)",
		},
		{
			name:   "all fail again",
			second: Result{Failed: []string{"b", "c", "d"}, Failures: map[string]string{"b": "b2", "c": "c2", "d": "d2"}},
			want: Result{
				Passed: []string{"a"}, Failed: []string{"b", "c", "d"}, Skipped: []string{"e"},
				Failures: map[string]string{"b": "b2", "c": "c2", "d": "d2"},
			},
			str: "1 passed, 3 failed, 1 skipped",
		},
		{
			name:   "a test the rerun skipped stays failed with its first failure",
			second: Result{Passed: []string{"b", "c"}, Skipped: []string{"d"}, Failures: map[string]string{}},
			want: Result{
				Passed: []string{"a", "b", "c"}, Failed: []string{"d"}, Skipped: []string{"e"}, Flaky: []string{"b", "c"},
				Failures: map[string]string{"b": "b timed out", "c": "c refused", "d": "d refused"},
			},
			str: "3 passed, 1 failed, 1 skipped (2 of the passed flaky: failed, then passed on the rerun)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Rerun(first, tt.second)
			for _, c := range []struct {
				what      string
				got, want []string
			}{{"passed", got.Passed, tt.want.Passed}, {"failed", got.Failed, tt.want.Failed}, {"skipped", got.Skipped, tt.want.Skipped}, {"flaky", got.Flaky, tt.want.Flaky}} {
				if !slices.Equal(c.got, c.want) {
					t.Errorf("%s = %q, want %q", c.what, c.got, c.want)
				}
			}
			for n, m := range tt.want.Failures {
				if got.Failures[n] != m {
					t.Errorf("failure of %s = %q, want %q", n, got.Failures[n], m)
				}
			}
			if got.String() != tt.str {
				t.Errorf("String() = %q, want %q", got.String(), tt.str)
			}
		})
	}
}

// The ginkgo CLI gets the --ginkgo.* flags as its own, before the binary; e2e.test's own
// flags follow "--", in their order.
func TestGinkgoArgs(t *testing.T) {
	tests := []struct {
		name  string
		procs int
		args  []string
		want  []string
	}{
		{
			name:  "focus, skip and timeout move to the CLI",
			procs: 4,
			args:  []string{"--provider=local", "--ginkgo.timeout=1h", "--ginkgo.no-color", "--kubeconfig=k", "--ginkgo.focus=^[^\\[]* (?:a)$", "--ginkgo.skip=b"},
			want:  []string{"--procs=4", "--timeout=1h", "--no-color", "--focus=^[^\\[]* (?:a)$", "--skip=b", "/bin/e2e.test", "--", "--provider=local", "--kubeconfig=k"},
		},
		{
			name:  "no ginkgo flag",
			procs: 2,
			args:  []string{"--provider=local"},
			want:  []string{"--procs=2", "/bin/e2e.test", "--", "--provider=local"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := GinkgoArgs("/bin/e2e.test", tt.procs, tt.args); !slices.Equal(got, tt.want) {
				t.Errorf("GinkgoArgs = %q, want %q", got, tt.want)
			}
		})
	}
}
