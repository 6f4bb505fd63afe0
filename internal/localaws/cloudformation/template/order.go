package template

import "slices"

// cycles returns the nodes of a dependency graph that lie on a cycle, sorted; none
// when the graph is acyclic.
func cycles(deps map[string][]string) []string {
	var out []string
	for _, n := range sortedKeys(deps) {
		if reaches(deps, n, n) {
			out = append(out, n)
		}
	}
	return out
}

// reaches reports whether to is reachable from from along one or more edges.
func reaches(deps map[string][]string, from, to string) bool {
	seen := map[string]bool{}
	stack := slices.Clone(deps[from])
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n == to {
			return true
		}
		if !seen[n] {
			seen[n] = true
			stack = append(stack, deps[n]...)
		}
	}
	return false
}

// Order is the resources' creation order: each after its dependencies (Ref, GetAtt,
// Sub references and DependsOn), ties by logical ID; deletion is the reverse. Only
// valid after Validate succeeded.
func (t *Template) Order() []string {
	if t.deps == nil {
		return nil
	}
	done := map[string]bool{}
	var order []string
	ids := sortedKeys(t.Resources)
	for len(order) < len(ids) {
		progressed := false
		for _, id := range ids {
			if done[id] {
				continue
			}
			ready := true
			for _, d := range t.deps[id] {
				ready = ready && done[d]
			}
			if ready {
				done[id] = true
				order = append(order, id)
				progressed = true
				break
			}
		}
		if !progressed {
			break // a cycle, which Validate refuses
		}
	}
	return order
}

// DependsOn returns a resource's direct dependencies, sorted. Only valid after
// Validate succeeded.
func (t *Template) DependsOn(logicalID string) []string {
	return slices.Clone(t.deps[logicalID])
}
