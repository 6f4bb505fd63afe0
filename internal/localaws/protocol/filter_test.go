package protocol

import (
	"slices"
	"testing"
)

func TestGlobMatch(t *testing.T) {
	for _, tt := range []struct {
		pattern, s string
		want       bool
	}{
		{"", "", true},
		{"", "a", false},
		{"*", "", true},
		{"*", "anything", true},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"a*c", "abbbc", true},
		{"a*c", "abbbd", false},
		{"*b*", "abc", true},
		{"ip-*.compute.internal", "ip-10-0-0-1.us-west-2.compute.internal", true},
		{`a\*`, "a*", true},
		{`a\*`, "ab", false},
		{`a\?`, "ab", false},
		{`a\\`, `a\`, true},
		{`a\`, `a\`, true},
		{"**a**b**", "xaxb", true},
		{"é?", "éü", true},
		// Bytes that are not UTF-8 match only themselves (or ? and *).
		{"\xfc", "\x84", false},
		{"\xfc", "\xfc", true},
		{"\ufffd", "\x84", false},
		{"a?", "a\x84", true},
	} {
		if got := GlobMatch(tt.pattern, tt.s); got != tt.want {
			t.Errorf("GlobMatch(%q, %q) = %t, want %t", tt.pattern, tt.s, got, tt.want)
		}
	}
}

// A filter made by NewFilter accepts exactly the values that one of its values
// matches as a pattern: sorting literal values into a set changes no answer.
func FuzzEC2FilterAccepts(f *testing.F) {
	f.Add("ip-198-18-0-1.local.internal", "ip-198-18-0-2.local.internal", "ip-198-18-0-1.local.internal")
	f.Add("ip-*", `a\*`, "a*")
	f.Add("a?c", "", "abc")
	f.Add(`a\`, "x", `a\`)
	f.Add("é?", "é", "éü")
	f.Fuzz(func(t *testing.T, v1, v2, have string) {
		values := []string{v1, v2}
		want := slices.ContainsFunc(values, func(w string) bool { return GlobMatch(w, have) })
		if got := NewFilter("private-dns-name", values).Accepts(have); got != want {
			t.Errorf("filter %q accepts %q = %t, a glob match of its values says %t", values, have, got, want)
		}
	})
}
