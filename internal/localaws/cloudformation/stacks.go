package cloudformation

// This file holds the stack store: the stacks the account has, as the read actions
// show them. The stack engine (engine.go) puts and updates them.

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// Stack is one stack as CloudFormation reports it.
type Stack struct {
	Name string
	// ID is the stack's ARN; Put derives it from the name and creation time when empty.
	ID           string
	Description  string
	Status       string // CREATE_COMPLETE, …
	StatusReason string
	Created      time.Time
	Updated      time.Time // zero: never updated
	Deleted      time.Time // zero: not deleted
	Parameters   map[string]string
	Tags         map[string]string
	Outputs      []Output
	Resources    []Resource
	// Events are the stack's events, the oldest first (DescribeStackEvents lists them
	// newest first).
	Events []Event
}

// Output is one of a stack's outputs.
type Output struct {
	Key, Value, Description, ExportName string
}

// Resource is one of a stack's resources.
type Resource struct {
	LogicalID, PhysicalID, Type string
	Status, StatusReason        string
	Updated                     time.Time
}

// Event is one of a stack's events: a resource (or the stack itself) changing status.
type Event struct {
	ID                          string
	LogicalID, PhysicalID, Type string
	Status, StatusReason        string
	Time                        time.Time
}

// Stacks is the account's stacks: the live ones by name, and the deleted ones (which
// ListStacks still shows, and which only their ID finds). Safe for concurrent use.
type Stacks struct {
	region, account string

	mu      sync.Mutex
	live    map[string]*Stack
	deleted []*Stack
}

// NewStacks returns an empty store of an account in a region, which the stacks' IDs name.
func NewStacks(region, account string) *Stacks {
	return &Stacks{region: region, account: account, live: map[string]*Stack{}}
}

// stackID is the ARN of a stack, unique to its name and creation.
func (s *Stacks) stackID(name string, created time.Time) string {
	sum := sha256.Sum256([]byte(name + "\x00" + created.UTC().Format(time.RFC3339Nano)))
	h := hex.EncodeToString(sum[:16])
	return fmt.Sprintf("arn:aws:cloudformation:%s:%s:stack/%s/%s-%s-%s-%s-%s", s.region, s.account, name, h[:8], h[8:12], h[12:16], h[16:20], h[20:32])
}

// Put adds or replaces a live stack by name and returns it as stored (with its ID). A
// stack with Deleted set moves to the deleted ones.
func (s *Stacks) Put(st Stack) Stack {
	if st.ID == "" {
		st.ID = s.stackID(st.Name, st.Created)
	}
	st = clone(st)
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.Deleted.IsZero() {
		s.live[st.Name] = &st
		return clone(st)
	}
	delete(s.live, st.Name)
	s.deleted = append(s.deleted, &st)
	return clone(st)
}

// Update changes the live stack named name with fn, under the store's lock; false
// when there is none.
func (s *Stacks) Update(name string, fn func(*Stack)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.live[name]
	if ok {
		fn(st)
	}
	return ok
}

// Get finds a stack by name (live only) or by ID (live or deleted), as CloudFormation's
// StackName parameter does.
func (s *Stacks) Get(nameOrID string) (Stack, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.live[nameOrID]; ok {
		return clone(*st), true
	}
	if !strings.HasPrefix(nameOrID, "arn:") {
		return Stack{}, false
	}
	for _, st := range s.all() {
		if st.ID == nameOrID {
			return clone(*st), true
		}
	}
	return Stack{}, false
}

// List returns the live stacks by name, then the deleted ones, oldest first.
func (s *Stacks) List(withDeleted bool) []Stack {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Stack
	for _, st := range s.all() {
		if withDeleted || st.Deleted.IsZero() {
			out = append(out, clone(*st))
		}
	}
	return out
}

// all is the live stacks by name, then the deleted. Locked.
func (s *Stacks) all() []*Stack {
	var out []*Stack
	for _, name := range slices.Sorted(maps.Keys(s.live)) {
		out = append(out, s.live[name])
	}
	return append(out, s.deleted...)
}

func clone(st Stack) Stack {
	st.Parameters, st.Tags = maps.Clone(st.Parameters), maps.Clone(st.Tags)
	st.Outputs, st.Resources, st.Events = slices.Clone(st.Outputs), slices.Clone(st.Resources), slices.Clone(st.Events)
	return st
}
