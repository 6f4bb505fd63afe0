package bench

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"sync"
	"time"

	"github.com/google/pprof/profile"
	"k8s.io/client-go/rest"
)

// apiserverSlice is how long each CPU profile read from kube-apiserver lasts. Its
// /debug/pprof/profile answers only once the profile's duration has passed, and the
// burst's length is not known in advance, so the burst is profiled in slices that are
// merged at its end.
const apiserverSlice = 2 * time.Second

// burstProfiles starts CPU profiles of the burst when --profile is set: this process
// (the simulated kubelets and the bench's own watchers) and kube-apiserver. The
// function it returns stops both and writes <label>-kubelets.cpu.pprof and
// <label>-kube-apiserver.cpu.pprof; calling it again does nothing. A profile that
// cannot be taken is a warning, not a failed run.
func (r *run) burstProfiles(ctx context.Context) func() {
	if r.opts.ProfileDir == "" {
		return func() {}
	}
	var self bytes.Buffer
	selfOn := true
	if err := pprof.StartCPUProfile(&self); err != nil {
		r.progress("warning: no CPU profile of the simulated kubelets: %v", err)
		selfOn = false
	}
	apiCtx, stopAPI := context.WithCancel(ctx)
	var (
		mu     sync.Mutex
		slices []*profile.Profile
	)
	// A plain HTTP client with the admin's credentials, not client-go's REST client,
	// which logs the cancelled last slice as an error.
	hc, apiErr := rest.HTTPClientFor(r.cluster.RESTConfig())
	url := r.cluster.Endpoint() + "/debug/pprof/profile?seconds=" + strconv.Itoa(int(apiserverSlice/time.Second))
	stopping, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for apiErr == nil {
			raw, err := fetchWith(apiCtx, hc, url)
			if apiCtx.Err() != nil {
				return
			}
			var p *profile.Profile
			if err == nil {
				p, err = profile.ParseData(raw)
			}
			if err != nil {
				apiErr = err
				return
			}
			mu.Lock()
			slices = append(slices, p)
			mu.Unlock()
			select {
			case <-stopping:
				return
			default:
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			if selfOn {
				pprof.StopCPUProfile()
				r.writeProfile("kubelets", self.Bytes())
			}
			// The slice under way is dropped, unless it is the first: a burst shorter
			// than a slice still gets its profile, at the cost of waiting for it.
			close(stopping)
			mu.Lock()
			if len(slices) > 0 {
				stopAPI()
			}
			mu.Unlock()
			<-done
			stopAPI()
			if apiErr == nil && len(slices) == 0 {
				apiErr = errors.New("the burst ended before the first slice of " + apiserverSlice.String())
			}
			if apiErr != nil {
				r.progress("warning: no CPU profile of kube-apiserver: %v", apiErr)
				return
			}
			merged, err := profile.Merge(slices)
			if err != nil {
				r.progress("warning: merging kube-apiserver's CPU profiles: %v", err)
				return
			}
			var buf bytes.Buffer
			if err := merged.Write(&buf); err != nil {
				r.progress("warning: kube-apiserver's CPU profile: %v", err)
				return
			}
			r.writeProfile("kube-apiserver", buf.Bytes())
		})
	}
}

// writeProfile writes a profile into the profile directory as <label>-<what>.cpu.pprof.
func (r *run) writeProfile(what string, data []byte) {
	path := filepath.Join(r.opts.ProfileDir, r.label+"-"+what+".cpu.pprof")
	if err := os.WriteFile(path, data, 0o644); err != nil { //nolint:gosec // G306: a CPU profile for the operator's tools, no secrets.
		r.progress("warning: %v", err)
	}
}

// heapProfiles saves each live replica's heap profile.
func (r *run) heapProfiles(ctx context.Context) {
	for _, rep := range r.replicas {
		if rep.killed || rep.pprofURL == "" {
			continue
		}
		data, err := fetch(ctx, rep.pprofURL+"heap")
		if err == nil {
			err = os.WriteFile(filepath.Join(r.opts.ProfileDir, r.label+"-"+rep.id+".heap.pprof"), data, 0o644) //nolint:gosec // G306: a heap profile for the operator's tools, no secrets.
		}
		if err != nil {
			r.progress("warning: heap profile of controller %s: %v", rep.id, err)
		}
	}
}
