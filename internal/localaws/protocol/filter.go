package protocol

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Filter is one EC2-style filter: a name and the values, any of which may match.
type Filter struct {
	Name   string
	Values []string
	// exact holds the values without a wildcard or an escape, each of which matches
	// only itself; globs holds the others. A request may name hundreds of values
	// (nodejoin's batched instance lookups do) and every resource is checked against
	// each, so the literal ones are one map lookup instead of one glob match each.
	exact map[string]struct{}
	globs []string
}

// NewFilter is a filter with its values sorted into literals and patterns.
func NewFilter(name string, values []string) Filter {
	f := Filter{Name: name, Values: values, exact: make(map[string]struct{}, len(values))}
	for _, v := range values {
		if strings.ContainsAny(v, `*?\`) {
			f.globs = append(f.globs, v)
		} else {
			f.exact[v] = struct{}{}
		}
	}
	return f
}

// Accepts reports whether a value matches one of the filter's values.
func (f Filter) Accepts(have string) bool {
	if _, ok := f.exact[have]; ok {
		return true
	}
	return slices.ContainsFunc(f.globs, func(want string) bool { return GlobMatch(want, have) })
}

// AcceptsAny reports whether one of the values matches.
func (f Filter) AcceptsAny(have []string) bool { return slices.ContainsFunc(have, f.Accepts) }

// IsTag tells whether the filter is on tags: tag:KEY or tag-key.
func (f Filter) IsTag() bool { return f.Name == "tag-key" || strings.HasPrefix(f.Name, "tag:") }

// acceptsTags applies a tag filter to a resource's tags.
func (f Filter) acceptsTags(tags map[string]string) bool {
	if key, ok := strings.CutPrefix(f.Name, "tag:"); ok {
		v, has := tags[key]
		return has && f.Accepts(v)
	}
	for k := range tags {
		if f.Accepts(k) {
			return true
		}
	}
	return false
}

// MatchesAll reports whether a resource matches every filter: tag filters against its
// tags, the others against the values valuesOf gives for the filter's name.
func MatchesAll(filters []Filter, tags map[string]string, valuesOf func(name string) []string) bool {
	for _, f := range filters {
		if f.IsTag() && !f.acceptsTags(tags) || !f.IsTag() && !f.AcceptsAny(valuesOf(f.Name)) {
			return false
		}
	}
	return true
}

// Filters reads Filter.N.Name and Filter.N.Value.M; known tells the filter names the
// action has.
func (n *Params) Filters(known func(name string) bool) ([]Filter, *Error) {
	var out []Filter
	for _, f := range n.List("Filter") {
		name, ok := f.Str("Name")
		if !ok {
			return nil, InvalidParameter("The filter 'null' is invalid")
		}
		if !known(name) {
			return nil, InvalidParameter("The filter '%s' is invalid", name)
		}
		values := f.StrList("Value")
		if len(values) == 0 {
			return nil, InvalidParameter("The filter '%s' has no values", name)
		}
		out = append(out, NewFilter(name, values))
	}
	return out, nil
}

// runesOf decodes a string into runes, with each byte that is not part of valid UTF-8
// as a value of its own above the Unicode range. []rune(s) would turn every such byte
// into U+FFFD, and a pattern would then match bytes it does not contain.
func runesOf(s string) []rune {
	out := make([]rune, 0, len(s))
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		if r == utf8.RuneError && size == 1 {
			r = unicode.MaxRune + 1 + rune(s[0])
		}
		out = append(out, r)
		s = s[size:]
	}
	return out
}

// GlobMatch matches EC2 filter values: * is any run of characters, ? any one
// character, and a backslash escapes the character after it. It runs in
// O(len(pattern)·len(s)).
func GlobMatch(pattern, s string) bool {
	type tok struct {
		r    rune
		kind byte // 'c' a character, '?' any one, '*' any run
	}
	var toks []tok
	escaped := false
	for _, c := range runesOf(pattern) {
		switch {
		case escaped:
			toks, escaped = append(toks, tok{c, 'c'}), false
		case c == '\\':
			escaped = true
		case c == '*' || c == '?':
			toks = append(toks, tok{0, byte(c)})
		default:
			toks = append(toks, tok{c, 'c'})
		}
	}
	if escaped {
		toks = append(toks, tok{'\\', 'c'})
	}
	str := runesOf(s)
	p, i, star, mark := 0, 0, -1, 0
	for i < len(str) {
		switch {
		case p < len(toks) && (toks[p].kind == '?' || toks[p].kind == 'c' && toks[p].r == str[i]):
			p++
			i++
		case p < len(toks) && toks[p].kind == '*':
			star, mark = p, i
			p++
		case star >= 0:
			mark++
			p, i = star+1, mark
		default:
			return false
		}
	}
	for p < len(toks) && toks[p].kind == '*' {
		p++
	}
	return p == len(toks)
}
