package csr

import (
	"context"
	"fmt"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodejoin/nodejoin/internal/inventory"
)

// fleet is an inventory by instance ID whose instances launch and terminate; IDs it
// never saw, or forgot (as EC2 forgets terminated instances after a while), are not
// found.
type fleet struct {
	mu     sync.Mutex
	states map[string]string
}

func (f *fleet) Instance(_ context.Context, id string) (*inventory.Instance, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.states[id]
	if !ok {
		return nil, inventory.ErrNotFound
	}
	return &inventory.Instance{ID: id, State: s}, nil
}

func (f *fleet) set(id, state string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if state == "" {
		delete(f.states, id)
		return
	}
	f.states[id] = state
}

// Item 5 of issue 25: the record of bootstrap joins only grew, one ConfigMap that
// stops every bootstrap join once it reaches the API server's object size limit. With
// pruning between rounds of instances that join and are replaced, it never holds more
// than the live instances, and a live instance keeps its holder (its token gets no
// second certificate).
func TestConfigMapRecordForgetsGoneInstances(t *testing.T) {
	client := fake.NewClientset()
	f := &fleet{states: map[string]string{}}
	r := &ConfigMapRecord{Client: client, Instances: f}
	ctx := t.Context()
	const live, rounds = 20, 10
	n := 0
	var current []string
	for round := range rounds {
		// The previous round's instances go: half terminated (still described), half
		// forgotten by EC2; a stopped one of them stays (it may start again).
		for i, id := range current {
			switch {
			case i == 0 && round == 1:
				f.set(id, "stopped")
			case i%2 == 0:
				f.set(id, "terminated")
			default:
				f.set(id, "")
			}
		}
		current = current[:0]
		for range live {
			n++
			id := fmt.Sprintf("i-%04d", n)
			f.set(id, "running")
			current = append(current, id)
			if h, err := r.Claim(ctx, id, "csr-"+id); err != nil || h != "csr-"+id {
				t.Fatalf("claim %s: %q, %v", id, h, err)
			}
		}
		if _, err := r.Prune(ctx); err != nil {
			t.Fatal(err)
		}
		cm, err := client.CoreV1().ConfigMaps("kube-system").Get(ctx, IssuedConfigMapName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		stopped := 0
		if round >= 1 {
			stopped = 1
		}
		if len(cm.Data) != live+stopped {
			t.Errorf("round %d: the record holds %d instances, want the %d live ones and %d stopped", round, len(cm.Data), live, stopped)
		}
		for _, id := range current {
			if cm.Data[id] != "csr-"+id {
				t.Errorf("round %d: live instance %s lost its holder: %q", round, id, cm.Data[id])
			}
		}
	}
	// A live instance's token still gets no second certificate after the pruning.
	if h, err := r.Claim(ctx, current[0], "csr-again"); err != nil || h != "csr-"+current[0] {
		t.Errorf("claim again after pruning: %q, %v", h, err)
	}
	// A claim made after pruning is kept beside the pruned record.
	f.set("i-new", "running")
	if h, err := r.Claim(ctx, "i-new", "csr-new"); err != nil || h != "csr-new" {
		t.Errorf("claim after pruning: %q, %v", h, err)
	}
}

// An inventory that cannot answer makes the pruning fail or keep the entry, never drop
// a live instance's holder.
func TestPruneKeepsWhatItCannotCheck(t *testing.T) {
	client := fake.NewClientset()
	r := &ConfigMapRecord{Client: client, Instances: failing{}}
	if _, err := r.Claim(t.Context(), "i-1", "csr-1"); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Prune(t.Context()); err != nil || n != 0 {
		t.Errorf("Prune = %d, %v; want nothing forgotten", n, err)
	}
	if h, err := r.Holder(t.Context(), "i-1"); err != nil || h != "csr-1" {
		t.Errorf("holder after pruning = %q, %v", h, err)
	}
	none := &ConfigMapRecord{Client: client}
	if n, err := none.Prune(t.Context()); err != nil || n != 0 {
		t.Errorf("Prune without an inventory = %d, %v", n, err)
	}
}

type failing struct{}

func (failing) Instance(context.Context, string) (*inventory.Instance, error) {
	return nil, fmt.Errorf("EC2 unavailable")
}
