package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/printer"
)

// Goal is what a long operation waits for.
type Goal int

// The goals of create, scale, upgrade and delete.
const (
	// Created: the group is ACTIVE with its desired number of Ready nodes.
	Created Goal = iota
	// Scaled: the controller saw the new sizes and the group holds exactly the
	// desired number of instances, all Ready.
	Scaled
	// Upgraded: no update is in progress and every node is Ready on the current
	// launch template version.
	Upgraded
	// Deleted: the object is gone.
	Deleted
)

// Reached says whether ng (nil when it does not exist) has reached goal for the spec
// generation gen, or fails with an error that says why and what to do.
//
//nolint:gocyclo // a switch over goals and phases, each case a short rule.
func Reached(goal Goal, gen int64, ng *v1alpha1.NodeGroup) (bool, error) {
	if goal == Deleted {
		if ng == nil {
			return true, nil
		}
		if ng.Status.Phase == v1alpha1.PhaseDeleteFailed {
			return false, fmt.Errorf("deleting node group %s failed: %s", ng.Name, issuesText(ng))
		}
		return false, nil
	}
	if ng == nil {
		return false, fmt.Errorf("the node group was deleted while waiting for it")
	}
	st := ng.Status
	if st.ObservedGeneration < gen {
		return false, nil
	}
	want := DesiredSize(ng)
	switch goal {
	case Created:
		if st.Phase == v1alpha1.PhaseCreateFailed {
			return false, fmt.Errorf("creating node group %s failed: %s; see `nodejoin describe nodegroup %s` and `nodejoin diagnose node`", ng.Name, issuesText(ng), ng.Name)
		}
		return st.Phase == v1alpha1.PhaseActive && st.ReadySize == want && int32(len(st.Instances)) == want, nil //nolint:gosec // G115: a group's instances number at most its int32 MaxSize.
	case Scaled:
		return st.Phase == v1alpha1.PhaseActive && st.ReadySize == want && int32(len(st.Instances)) == want, nil //nolint:gosec // G115: a group's instances number at most its int32 MaxSize.
	case Upgraded:
		if u := st.Update; u != nil && u.Phase == v1alpha1.UpdatePhaseFailed {
			msg := u.Message
			if msg == "" {
				msg = issuesText(ng)
			}
			fix := "see `nodejoin describe nodegroup " + ng.Name + "`"
			if hasIssue(ng, v1alpha1.IssuePodEvictionFailure) {
				fix = "let the blocking pods go (relax their PodDisruptionBudget) and run the upgrade again, or run `nodejoin upgrade nodegroup " + ng.Name + " --force` to delete them"
			}
			return false, fmt.Errorf("upgrading node group %s failed: %s; %s", ng.Name, msg, fix)
		}
		return st.Update == nil && st.Phase == v1alpha1.PhaseActive && st.UpdatedSize == want && st.ReadySize == want &&
			int32(len(st.Instances)) == want, nil //nolint:gosec // G115: a group's instances number at most its int32 MaxSize.
	}
	return false, fmt.Errorf("unknown goal %d", goal)
}

func hasIssue(ng *v1alpha1.NodeGroup, code v1alpha1.IssueCode) bool {
	for _, is := range ng.Status.Health.Issues {
		if is.Code == code {
			return true
		}
	}
	return false
}

// issuesText lists the group's health issues in one line.
func issuesText(ng *v1alpha1.NodeGroup) string {
	if len(ng.Status.Health.Issues) == 0 {
		return "no health issue reported"
	}
	parts := make([]string, 0, len(ng.Status.Health.Issues))
	for _, is := range ng.Status.Health.Issues {
		s := string(is.Code) + ": " + is.Message
		if len(is.ResourceIDs) > 0 {
			s += " (" + strings.Join(is.ResourceIDs, ", ") + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// IssuesText lists the group's health issues in one line, for messages.
func IssuesText(ng *v1alpha1.NodeGroup) string { return issuesText(ng) }

// WaitAll follows the groups until each reaches goal, writing their progress to w, and
// returns their last versions.
func (c *Client) WaitAll(ctx context.Context, names []string, goal Goal, gen int64, timeout time.Duration, w io.Writer) ([]v1alpha1.NodeGroup, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var mu sync.Mutex
	final := make([]v1alpha1.NodeGroup, len(names))
	g, gctx := errgroup.WithContext(ctx)
	for i, name := range names {
		g.Go(func() error {
			start, p := time.Now(), &Progress{}
			last, err := c.Wait(gctx, name,
				func(ng *v1alpha1.NodeGroup) (bool, error) { return Reached(goal, gen, ng) },
				func(ng *v1alpha1.NodeGroup) {
					mu.Lock()
					defer mu.Unlock()
					for _, line := range p.Lines(name, ng) {
						fmt.Fprintln(w, line)
					}
				})
			if err != nil {
				if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
					return c.timeoutError(name, goal, timeout, p.last)
				}
				return err
			}
			mu.Lock()
			fmt.Fprintf(w, " ✓ %s: %s (%s)\n", name, reachedText(goal, last), printer.Round(time.Since(start)))
			mu.Unlock()
			if last != nil {
				final[i] = *last
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return final, nil
}

func (c *Client) timeoutError(name string, goal Goal, timeout time.Duration, last *v1alpha1.NodeGroup) error {
	state := "never read"
	if last != nil {
		state = StateText(last) + "; " + IssuesText(last)
	}
	what := map[Goal]string{Created: "become ACTIVE", Scaled: "reach its size", Upgraded: "finish its update", Deleted: "be deleted"}[goal]
	return fmt.Errorf("node group %s did not %s within %s (last seen: %s); the controller keeps working on it: follow it with `nodejoin describe nodegroup --name %s --cluster %s`, see why a node does not join with `nodejoin diagnose node --name %s NODE`, or wait longer with --timeout",
		name, what, timeout, state, name, c.Cluster, c.Cluster)
}

// CreateAndWait creates the groups, writing a line for each created to w, and follows
// them until each is ACTIVE with its nodes Ready.
func (c *Client) CreateAndWait(ctx context.Context, groups []v1alpha1.NodeGroup, wait bool, timeout time.Duration, w io.Writer) (created []string, final []v1alpha1.NodeGroup, err error) {
	created, err = c.Create(ctx, groups)
	for _, n := range created {
		for i := range groups {
			if groups[i].Name == n {
				fmt.Fprintln(w, " ✓ created "+GroupLine(&groups[i]))
			}
		}
	}
	if err != nil || !wait {
		return created, nil, err
	}
	final, err = c.WaitAll(ctx, created, Created, 0, timeout, w)
	return created, final, err
}
