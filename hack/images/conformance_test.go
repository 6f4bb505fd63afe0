package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/nodejoin/nodejoin/internal/imagebuild"
)

func TestMergePins(t *testing.T) {
	const sum1, sum2 = "aa", "bb"
	base := []imagebuild.Pin{
		{Name: "libc6", Version: "2.36", SHA256: sum1, Sets: []string{"userland", "iptables"}},
		{Name: "dash", Version: "0.5", SHA256: sum1, Sets: []string{"userland"}},
	}
	tests := []struct {
		name  string
		extra []imagebuild.Pin
		want  map[string][]string // package: sets
		err   string
	}{
		{"new package", []imagebuild.Pin{{Name: "nginx", Version: "1.22", SHA256: sum2, Sets: []string{"nginx"}}},
			map[string][]string{"libc6": {"userland", "iptables"}, "dash": {"userland"}, "nginx": {"nginx"}}, ""},
		{"same pin, sets joined", []imagebuild.Pin{{Name: "libc6", Version: "2.36", SHA256: sum1, Sets: []string{"nginx", "userland"}}},
			map[string][]string{"libc6": {"userland", "iptables", "nginx"}, "dash": {"userland"}}, ""},
		{"other version", []imagebuild.Pin{{Name: "libc6", Version: "2.37", SHA256: sum1, Sets: []string{"nginx"}}},
			nil, "package libc6 is pinned as 2.36 (sha256 aa) and as 2.37 (sha256 aa)"},
		{"other file", []imagebuild.Pin{{Name: "libc6", Version: "2.36", SHA256: sum2, Sets: []string{"nginx"}}},
			nil, "package libc6 is pinned as 2.36 (sha256 aa) and as 2.36 (sha256 bb)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := mergePins(base, tt.extra)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			sets := map[string][]string{}
			for _, p := range got {
				sets[p.Name] = p.Sets
			}
			if !reflect.DeepEqual(sets, tt.want) {
				t.Errorf("sets = %v, want %v", sets, tt.want)
			}
			if !reflect.DeepEqual(base[0].Sets, []string{"userland", "iptables"}) {
				t.Errorf("base pins changed: %v", base[0].Sets)
			}
		})
	}
}

// The pin files in the tree merge: a package both pin has one version.
func TestPinFilesAgree(t *testing.T) {
	var all [][]imagebuild.Pin
	for _, f := range []string{"../../images/debian-packages.txt", "conformance-packages.txt"} {
		pins, err := parsePinFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, pins)
	}
	merged, err := mergePins(all[0], all[1])
	if err != nil {
		t.Fatal(err)
	}
	if len(imagebuild.InSet(merged, "nginx")) == 0 {
		t.Error("no package is in the nginx set")
	}
}

// The conformance images go where the conformance runner loads them from, under the
// names e2e.test asks for, and none is one that every node imports.
func TestConformanceImagesAreLoadedByTheRunnerOnly(t *testing.T) {
	names := map[string]bool{}
	for _, img := range images(&builder{}, "pause") {
		names[img.name] = true
	}
	for _, img := range conformanceImages("bin", "nnp", "sample-apiserver", "nginx.conf", "k8s", "busybox") {
		if img.dir != conformanceDir {
			t.Errorf("%s goes to %q, want %q (the runner's -images)", img.name, img.dir, conformanceDir)
		}
		if names[img.name] {
			t.Errorf("%s is also a built-in image", img.name)
		}
		for _, r := range img.refs {
			if !strings.HasPrefix(r, "registry.k8s.io/") {
				t.Errorf("%s: ref %s is not an upstream test image name", img.name, r)
			}
		}
	}
}
