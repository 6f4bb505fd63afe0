package protocol

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Dialect is how a service spells lists and refuses parameters.
type Dialect int

const (
	// EC2 lists are flat (Name.N); a bad or unknown parameter is InvalidParameterValue
	// or UnknownParameter.
	EC2 Dialect = iota
	// Query lists are member lists (Name.member.N); a bad or unknown parameter is a
	// ValidationError.
	Query
)

// maxListIndex bounds the N of a list member.
const maxListIndex = 1000

// ListIndex parses the N of a list member: 1 to 1000 in canonical form.
func ListIndex(s string) (int, bool) {
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 1 && n <= maxListIndex && strconv.Itoa(n) == s
}

// Params is a request's parameters as a tree: "A.B.1.C=v" is A → B → 1 → C = v. Each
// node read is marked, so that Finish refuses by name a parameter nobody read instead
// of ignoring it. A nil *Params reads as empty.
type Params struct {
	dialect  Dialect
	path     string
	value    string
	hasValue bool
	kids     map[string]*Params
	used     bool
}

// ParseForm builds the tree of a request's parameters; Action and Version are read.
func ParseForm(form url.Values, d Dialect) *Params {
	root := &Params{dialect: d, kids: map[string]*Params{}, used: true}
	for _, key := range slices.Sorted(maps.Keys(form)) {
		n := root
		for seg := range strings.SplitSeq(key, ".") {
			k := n.kids[seg]
			if k == nil {
				p := seg
				if n.path != "" {
					p = n.path + "." + seg
				}
				k = &Params{dialect: d, path: p, kids: map[string]*Params{}}
				n.kids[seg] = k
			}
			n = k
		}
		n.value, n.hasValue = form.Get(key), true
	}
	root.Str("Action")
	root.Str("Version")
	return root
}

// Path is the parameter name of the node, such as Filter.1.
func (n *Params) Path() string { return n.path }

// Child returns the member name, marked read, or nil.
func (n *Params) Child(name string) *Params {
	if n == nil {
		return nil
	}
	k := n.kids[name]
	if k != nil {
		k.used = true
	}
	return k
}

// Ignore marks the member name and everything under it read: accepted, without effect.
func (n *Params) Ignore(name string) {
	var mark func(*Params)
	mark = func(p *Params) {
		p.used = true
		for _, k := range p.kids {
			mark(k)
		}
	}
	if k := n.Child(name); k != nil {
		mark(k)
	}
}

// Str returns the value of the member name, and whether it was given.
func (n *Params) Str(name string) (string, bool) {
	k := n.Child(name)
	if k == nil || !k.hasValue {
		return "", false
	}
	return k.value, true
}

// StrPtr returns the value of the member name, nil when not given.
func (n *Params) StrPtr(name string) *string {
	if v, ok := n.Str(name); ok {
		return &v
	}
	return nil
}

// Required returns the value of the member name, refusing a request without it.
func (n *Params) Required(name string) (string, *Error) {
	v, ok := n.Str(name)
	if !ok || v == "" {
		return "", MissingParameter(name)
	}
	return v, nil
}

func (n *Params) badValue(name, v, kind string) *Error {
	path := n.kids[name].path
	if n.dialect == Query {
		return ValidationError("Value '%s' at '%s' failed to satisfy constraint: Member must be %s", v, path, map[string]string{"Integer": "an integer", "Boolean": "a boolean"}[kind])
	}
	return InvalidParameter("Value (%s) for parameter %s is invalid. Expected: '%s'.", v, path, kind)
}

// Int returns the member name as an integer, nil when not given.
func (n *Params) Int(name string) (*int64, *Error) {
	v, ok := n.Str(name)
	if !ok {
		return nil, nil
	}
	i, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return nil, n.badValue(name, v, "Integer")
	}
	return &i, nil
}

// Bool returns the member name as a boolean, nil when not given.
func (n *Params) Bool(name string) (*bool, *Error) {
	v, ok := n.Str(name)
	if !ok {
		return nil, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return nil, n.badValue(name, v, "Boolean")
	}
	return &b, nil
}

// List returns the members of the list name in index order, in the dialect's
// spelling. Indexes that are not canonical numbers from 1 are left unread, so that
// Finish names them.
func (n *Params) List(name string) []*Params {
	l := n.Child(name)
	if n != nil && n.dialect == Query {
		l = l.Child("member")
	}
	if l == nil {
		return nil
	}
	byIndex := map[int]*Params{}
	for k, v := range l.kids {
		if i, ok := ListIndex(k); ok {
			v.used = true
			byIndex[i] = v
		}
	}
	out := make([]*Params, 0, len(byIndex))
	for _, i := range slices.Sorted(maps.Keys(byIndex)) {
		out = append(out, byIndex[i])
	}
	return out
}

// StrList returns a list of strings (see List).
func (n *Params) StrList(name string) []string {
	var out []string
	for _, k := range n.List(name) {
		if k.hasValue {
			out = append(out, k.value)
		}
	}
	return out
}

// Unknown returns the first parameter (in name order) that was given but never read.
func (n *Params) Unknown() string {
	if n == nil {
		return ""
	}
	if n.hasValue && !n.used {
		return n.path
	}
	for _, k := range slices.Sorted(maps.Keys(n.kids)) {
		kid := n.kids[k]
		if !kid.used {
			return firstLeaf(kid)
		}
		if p := kid.Unknown(); p != "" {
			return p
		}
	}
	return ""
}

func firstLeaf(n *Params) string {
	if n.hasValue || len(n.kids) == 0 {
		return n.path
	}
	return firstLeaf(n.kids[slices.Sorted(maps.Keys(n.kids))[0]])
}

// Finish refuses the first parameter nobody read.
func (n *Params) Finish() *Error {
	u := n.Unknown()
	switch {
	case u == "":
		return nil
	case n.dialect == Query:
		return ValidationError("The parameter %s is not recognized", u)
	}
	return Errorf(http.StatusBadRequest, "UnknownParameter", "The parameter %s is not recognized", u)
}
