package localaws

// This file holds a Query protocol request's parameters as a tree, for the services with
// nested parameters (EC2 launch templates, Auto Scaling, CloudFormation): "A.B.1.C=v"
// becomes A → B → 1 → C = v. Every parameter read is marked, so that a request naming
// one the emulator does not understand is refused by name instead of silently ignored.

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// formNode is one parameter name's segment: a value, members, or both.
type formNode struct {
	path     string
	value    string
	hasValue bool
	kids     map[string]*formNode
	used     bool
}

// parseFormTree builds the tree of a request's parameters; Action and Version are
// marked used.
func parseFormTree(form url.Values) *formNode {
	root := &formNode{kids: map[string]*formNode{}, used: true}
	for _, key := range slices.Sorted(maps.Keys(form)) {
		n := root
		for seg := range strings.SplitSeq(key, ".") {
			k := n.kids[seg]
			if k == nil {
				p := seg
				if n.path != "" {
					p = n.path + "." + seg
				}
				k = &formNode{path: p, kids: map[string]*formNode{}}
				n.kids[seg] = k
			}
			n = k
		}
		n.value, n.hasValue = form.Get(key), true
	}
	for _, k := range []string{"Action", "Version"} {
		if n := root.kids[k]; n != nil {
			n.used = true
		}
	}
	return root
}

// child returns the member name, marked used, or nil.
func (n *formNode) child(name string) *formNode {
	if n == nil {
		return nil
	}
	k := n.kids[name]
	if k != nil {
		k.used = true
	}
	return k
}

// str returns the value of the member name, and whether it was given.
func (n *formNode) str(name string) (string, bool) {
	k := n.child(name)
	if k == nil || !k.hasValue {
		return "", false
	}
	return k.value, true
}

// strPtr returns the value of the member name, nil when not given.
func (n *formNode) strPtr(name string) *string {
	if v, ok := n.str(name); ok {
		return &v
	}
	return nil
}

// int returns the member name as an integer; the error names the parameter.
func (n *formNode) int(name string) (*int64, *apiError) {
	v, ok := n.str(name)
	if !ok {
		return nil, nil
	}
	i, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return nil, &apiError{http.StatusBadRequest, "ValidationError", fmt.Sprintf("Value '%s' at '%s' failed to satisfy constraint: Member must be an integer", v, n.kids[name].path)}
	}
	return &i, nil
}

// bool returns the member name as a boolean; the error names the parameter.
func (n *formNode) bool(name string) (*bool, *apiError) {
	v, ok := n.str(name)
	if !ok {
		return nil, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return nil, &apiError{http.StatusBadRequest, "ValidationError", fmt.Sprintf("Value '%s' at '%s' failed to satisfy constraint: Member must be a boolean", v, n.kids[name].path)}
	}
	return &b, nil
}

// list returns the members of a list in index order: EC2's flat lists ("Name.N") when
// member is false, Auto Scaling's ("Name.member.N") when true. Indexes that are not
// canonical numbers from 1 are left unused, so that unknownParameters names them.
func (n *formNode) list(name string, member bool) []*formNode {
	l := n.child(name)
	if member {
		l = l.child("member")
	}
	if l == nil {
		return nil
	}
	byIndex := map[int]*formNode{}
	for k, v := range l.kids {
		if i, ok := listIndex(k); ok {
			v.used = true
			byIndex[i] = v
		}
	}
	return valuesInOrder(byIndex)
}

// strList returns a list of strings (see list).
func (n *formNode) strList(name string, member bool) []string {
	var out []string
	for _, k := range n.list(name, member) {
		if k.hasValue {
			out = append(out, k.value)
		}
	}
	return out
}

// unknown returns the first parameter (in name order) that was given but never read.
func (n *formNode) unknown() string {
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
		if p := kid.unknown(); p != "" {
			return p
		}
	}
	return ""
}

func firstLeaf(n *formNode) string {
	if n.hasValue || len(n.kids) == 0 {
		return n.path
	}
	return firstLeaf(n.kids[slices.Sorted(maps.Keys(n.kids))[0]])
}
