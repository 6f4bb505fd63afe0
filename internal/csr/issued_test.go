package csr

import (
	"context"
	"fmt"
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
