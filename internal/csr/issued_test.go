package csr

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// Many claims at once, two for each instance: each instance gets one holder, every
// caller is told the same one, and the ConfigMap records it.
func TestConfigMapRecordConcurrentClaims(t *testing.T) {
	client := fake.NewClientset()
	r := &ConfigMapRecord{Client: client}
	const instances = 40
	holders := make([][2]string, instances)
	var wg sync.WaitGroup
	for i := range instances {
		for j := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				h, err := r.Claim(context.Background(), fmt.Sprintf("i-%d", i), fmt.Sprintf("csr-%d-%d", i, j))
				if err != nil {
					t.Errorf("claim %d/%d: %v", i, j, err)
				}
				holders[i][j] = h
			}()
		}
	}
	wg.Wait()
	cm, err := client.CoreV1().ConfigMaps("kube-system").Get(context.Background(), IssuedConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, h := range holders {
		if h[0] == "" || h[0] != h[1] {
			t.Errorf("instance %d: the two claims were told %q and %q", i, h[0], h[1])
		}
		if got := cm.Data[fmt.Sprintf("i-%d", i)]; got != h[0] {
			t.Errorf("instance %d: recorded %q, callers told %q", i, got, h[0])
		}
	}
	// A later claim finds the holder.
	if h, err := r.Claim(context.Background(), "i-0", "csr-late"); err != nil || h != holders[0][0] {
		t.Errorf("late claim: %q, %v; want %q", h, err, holders[0][0])
	}
}

// A claim after another writer changed the ConfigMap does not overwrite that writer's
// entries: the write carries the version this record last wrote, conflicts, and the
// claim is made again on the ConfigMap as it is now.
func TestConfigMapRecordClaimAfterAnotherWriter(t *testing.T) {
	client := versioned(fake.NewClientset())
	r := &ConfigMapRecord{Client: client}
	ctx := t.Context()
	if h, err := r.Claim(ctx, "i-1", "csr-1"); err != nil || h != "csr-1" {
		t.Fatalf("first claim: %q, %v", h, err)
	}
	cms := client.CoreV1().ConfigMaps("kube-system")
	cm, err := cms.Get(ctx, IssuedConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["i-2"] = "csr-other"
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if h, err := r.Claim(ctx, "i-2", "csr-2"); err != nil || h != "csr-other" {
		t.Errorf("claim of an instance another writer claimed: %q, %v; want csr-other", h, err)
	}
	if h, err := r.Claim(ctx, "i-3", "csr-3"); err != nil || h != "csr-3" {
		t.Errorf("claim of a free instance: %q, %v", h, err)
	}
	cm, err = cms.Get(ctx, IssuedConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"i-1": "csr-1", "i-2": "csr-other", "i-3": "csr-3"}
	if !maps.Equal(cm.Data, want) {
		t.Errorf("ConfigMap data %v, want %v", cm.Data, want)
	}
	for id, csr := range want {
		if h, err := r.Holder(ctx, id); err != nil || h != csr {
			t.Errorf("Holder(%s): %q, %v; want %q", id, h, err, csr)
		}
	}
}

// Holder answers from the copy the last claim wrote, but reads the ConfigMap again
// before it names a holder: an entry a person removed no longer refuses the instance.
// A claim made meanwhile by another writer may be missed by Holder, never by Claim.
func TestConfigMapRecordHolder(t *testing.T) {
	client := versioned(fake.NewClientset())
	r := &ConfigMapRecord{Client: client}
	ctx := t.Context()
	if h, err := r.Holder(ctx, "i-1"); err != nil || h != "" {
		t.Fatalf("Holder before any ConfigMap: %q, %v", h, err)
	}
	if h, err := r.Claim(ctx, "i-1", "csr-1"); err != nil || h != "csr-1" {
		t.Fatalf("claim: %q, %v", h, err)
	}
	cms := client.CoreV1().ConfigMaps("kube-system")
	cm, err := cms.Get(ctx, IssuedConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Another writer claims i-2; a person removes i-1's entry.
	cm.Data = map[string]string{"i-2": "csr-other"}
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if h, err := r.Holder(ctx, "i-1"); err != nil || h != "" {
		t.Errorf("Holder(i-1) after its entry was removed: %q, %v; want none", h, err)
	}
	if h, err := r.Claim(ctx, "i-2", "csr-2"); err != nil || h != "csr-other" {
		t.Errorf("Claim(i-2) after another writer claimed it: %q, %v; want csr-other", h, err)
	}
	if h, err := r.Holder(ctx, "i-2"); err != nil || h != "csr-other" {
		t.Errorf("Holder(i-2): %q, %v; want csr-other", h, err)
	}
}
