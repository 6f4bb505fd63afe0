package userdata

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodejoin/nodejoin/api/nodeconfig/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/nodeadm/nodeconfig"
)

var update = flag.Bool("update", false, "rewrite golden files")

// seedResolver answers for the clusters that seed samples name without endpoint or CA,
// as EKS DescribeCluster would.
func seedResolver(t *testing.T) *fakeResolver {
	ca, err := os.ReadFile("testdata/seeds/ca.pem")
	if err != nil {
		t.Fatal(err)
	}
	return &fakeResolver{cluster: "bys-dev-eks-main", info: ClusterInfo{
		Endpoint: "https://EXAMPLE0123456789.gr7.ap-northeast-2.eks.amazonaws.com", CertificateData: ca,
		ServiceIPv4CIDR: "172.20.0.0/16", IPFamily: "ipv4",
	}, others: map[string]ClusterInfo{"cluster_name": {
		Endpoint: "https://EXAMPLE0123456789.gr7.us-west-2.eks.amazonaws.com", CertificateData: ca,
		ServiceIPv4CIDR: "10.100.0.0/16", IPFamily: "ipv4",
	}}, vpc: []string{"192.168.0.0/16"}}
}

type goldenPart struct {
	Index       int      `json:"index"`
	Kind        Kind     `json:"kind"`
	ContentType string   `json:"contentType,omitempty"`
	Layers      []string `json:"layers,omitempty"`
}

type golden struct {
	Layers   []string             `json:"layers,omitempty"`
	Parts    []goldenPart         `json:"parts,omitempty"`
	Findings []string             `json:"findings,omitempty"`
	Sources  []string             `json:"sources,omitempty"`
	Merged   *v1alpha1.NodeConfig `json:"merged,omitempty"`
	Problems []string             `json:"problems,omitempty"`
	Error    string               `json:"error,omitempty"`
}

// TestSeeds decodes every user-data sample of the seed articles (testdata/seeds,
// described in INDEX.md) and compares the parts, findings and merged NodeConfig with
// golden files. Run with -update to rewrite them, then review the diff.
func TestSeeds(t *testing.T) {
	files, err := filepath.Glob("testdata/seeds/[0-9]*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no seed samples: %v", err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var g golden
			res, err := Decode(t.Context(), data, seedResolver(t))
			if err != nil {
				g.Error = err.Error()
			} else {
				g.Layers = res.Document.Layers
				for _, p := range res.Document.Parts {
					g.Parts = append(g.Parts, goldenPart{Index: p.Index, Kind: p.Kind, ContentType: p.ContentType, Layers: p.Layers})
				}
				for _, fd := range res.Findings {
					g.Findings = append(g.Findings, fd.String())
				}
				var cfgs []*v1alpha1.NodeConfig
				for _, c := range res.Configs {
					cfgs = append(cfgs, c.Config)
					g.Sources = append(g.Sources, c.Source+" ("+string(c.Kind)+")")
				}
				if len(cfgs) > 0 {
					if g.Merged, err = nodeconfig.Merge(cfgs); err != nil {
						t.Fatal(err)
					}
					for _, e := range g.Merged.Validate() {
						g.Problems = append(g.Problems, e.Error())
					}
				}
			}
			got, err := json.MarshalIndent(g, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join("testdata", "golden", strings.TrimSuffix(name, filepath.Ext(name))+".json")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -run TestSeeds -update)", err)
			}
			if string(want) != string(got) {
				t.Errorf("%s differs from the golden file %s:\n%s", name, path, got)
			}
		})
	}
}
