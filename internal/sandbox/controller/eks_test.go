package controller

import (
	"slices"
	"testing"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/localaws"
)

// `nodejoin describe nodegroup` resolves releases and default subnets as the running
// cluster's EKS does: the same catalog, the same zone subnets.
func TestAccountReleasesAgreeWithTheLocalEKS(t *testing.T) {
	releases, subnets := AccountReleases(DefaultRegion, "1.37")
	catalog := localaws.NewEC2(DefaultAccountID).Releases()
	for _, f := range v1alpha1.AMIFamilies {
		want, ok := catalog.Latest("1.37", string(f))
		rel, ami, got := releases.Latest(f)
		if ok != got || rel != want.ReleaseVersion || ami != want.ImageID {
			t.Errorf("%s: Latest = %s %s %v, want %s %s %v", f, rel, ami, got, want.ReleaseVersion, want.ImageID, ok)
		}
		if fam, r, ok := releases.ReleaseOf(want.ImageID); !ok || fam != f || r != want.ReleaseVersion {
			t.Errorf("%s: ReleaseOf(%s) = %s %s %v", f, want.ImageID, fam, r, ok)
		}
	}
	// Another version's image is no release of this cluster's.
	other, _ := catalog.Latest("1.36", string(v1alpha1.AMIFamilyAmazonLinux2023))
	if _, _, ok := releases.ReleaseOf(other.ImageID); ok {
		t.Errorf("ReleaseOf(%s), a 1.36 image, found a 1.37 release", other.ImageID)
	}
	var want []string
	for _, s := range localaws.DefaultSubnets(DefaultRegion) {
		want = append(want, s.ID)
	}
	if !slices.Equal(subnets, want) || len(subnets) < 2 {
		t.Errorf("subnets = %v, want %v", subnets, want)
	}
}
