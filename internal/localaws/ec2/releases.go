package ec2

// This file holds the release catalog: the EKS-optimized AMIs the local account offers
// for each Kubernetes version, as AWS publishes them (DescribeImages lists them, SSM's
// public parameters name them, EKS reports their release versions).

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// AMI families, spelled as api/nodejoin/v1alpha1's AMIFamily values. The local AWS does
// not import the API group, so the catalog's tests check the two agree.
const (
	FamilyAmazonLinux2    = "AmazonLinux2"
	FamilyAmazonLinux2023 = "AmazonLinux2023"
	FamilyBottlerocket    = "Bottlerocket"
	FamilyWindows         = "Windows"
)

// Families are the AMI families the catalog holds, in its order.
var Families = []string{FamilyAmazonLinux2, FamilyAmazonLinux2023, FamilyBottlerocket, FamilyWindows}

// AmazonAccountID owns the catalog's images, as EKS's account owns the EKS-optimized
// AMIs; their owner alias is "amazon".
const AmazonAccountID = "602401143452"

// DefaultKubernetesVersions are the versions NewReleaseCatalog offers when given none.
var DefaultKubernetesVersions = []string{"1.33", "1.34", "1.35", "1.36", "1.37"}

// Release is one EKS-optimized AMI release of one family for one Kubernetes version.
type Release struct {
	// Family is one of Families.
	Family            string
	KubernetesVersion string // "1.37"
	// ReleaseVersion is what EKS reports for a node group on this image:
	// "1.37.1-20261015" for Amazon Linux and Windows, "1.50.0-abcdef12" for Bottlerocket.
	ReleaseVersion string
	ImageID        string // ami- and 17 hex digits, derived from the name
	Name           string // the image name, as AWS names the family's images
	Description    string
	CreationDate   time.Time
	Architecture   string // x86_64
}

// build is one release build of every family: the older first, the latest last.
type build struct {
	date              time.Time
	patch             int    // the Kubernetes patch release the build ships
	bottlerocket      string // Bottlerocket's OS version
	bottlerocketBuild string // and its build's commit
}

// builds are fixed, not derived from the clock, so the catalog is the same on every run.
var builds = []build{
	{date: time.Date(2026, 9, 15, 4, 12, 0, 0, time.UTC), patch: 0, bottlerocket: "1.49.0", bottlerocketBuild: commitOf("1.49.0")},
	{date: time.Date(2026, 10, 15, 4, 12, 0, 0, time.UTC), patch: 1, bottlerocket: "1.50.0", bottlerocketBuild: commitOf("1.50.0")},
}

// commitOf is a Bottlerocket build's short commit, derived from its version.
func commitOf(version string) string {
	sum := sha256.Sum256([]byte("bottlerocket/" + version))
	return hex.EncodeToString(sum[:])[:8]
}

// imageIDOf derives an image's ID from its name, as stable as the name.
func imageIDOf(name string) string {
	sum := sha256.Sum256([]byte("image/" + name))
	return "ami-" + hex.EncodeToString(sum[:])[:17]
}

var kubernetesVersionRE = regexp.MustCompile(`^1\.[0-9]{1,3}$`)

// releaseOf is one family's release of one build for a Kubernetes version.
func releaseOf(family, version string, b build) Release {
	day := b.date.Format("20060102")
	kube := fmt.Sprintf("%s.%d", version, b.patch)
	r := Release{Family: family, KubernetesVersion: version, ReleaseVersion: kube + "-" + day, CreationDate: b.date, Architecture: "x86_64"}
	switch family {
	case FamilyAmazonLinux2:
		r.Name = fmt.Sprintf("amazon-eks-node-%s-v%s", version, day)
		r.Description = fmt.Sprintf("EKS Kubernetes Worker AMI with AmazonLinux2 image, (k8s: %s, containerd: 1.7.*)", kube)
	case FamilyAmazonLinux2023:
		r.Name = fmt.Sprintf("amazon-eks-node-al2023-x86_64-standard-%s-v%s", version, day)
		r.Description = fmt.Sprintf("EKS-optimized Kubernetes node based on Amazon Linux 2023, (k8s: %s, containerd: 2.1.*)", kube)
	case FamilyBottlerocket:
		r.ReleaseVersion = b.bottlerocket + "-" + b.bottlerocketBuild
		r.Name = fmt.Sprintf("bottlerocket-aws-k8s-%s-x86_64-v%s-%s", version, b.bottlerocket, b.bottlerocketBuild)
		r.Description = fmt.Sprintf("bottlerocket-aws-k8s-%s-x86_64-v%s-%s", version, b.bottlerocket, b.bottlerocketBuild)
	case FamilyWindows:
		r.Name = fmt.Sprintf("Windows_Server-2022-English-Core-EKS_Optimized-%s-%s", version, b.date.Format("2006.01.02"))
		r.Description = fmt.Sprintf("Microsoft Windows Server 2022 Core optimized for EKS and provided by Amazon (k8s: %s)", kube)
	}
	r.ImageID = imageIDOf(r.Name)
	return r
}

// ReleaseCatalog is the EKS-optimized AMI releases of a set of Kubernetes versions:
// for each version and family an older release and the latest. It is immutable.
type ReleaseCatalog struct {
	versions []string
	byID     map[string]Release
}

// NewReleaseCatalog returns the catalog of the versions ("1.37"), or of
// DefaultKubernetesVersions when none is given. A version not of the form 1.N is left out.
func NewReleaseCatalog(versions ...string) *ReleaseCatalog {
	if len(versions) == 0 {
		versions = DefaultKubernetesVersions
	}
	c := &ReleaseCatalog{byID: map[string]Release{}}
	for _, v := range versions {
		if !kubernetesVersionRE.MatchString(v) || slices.Contains(c.versions, v) {
			continue
		}
		c.versions = append(c.versions, v)
		for _, f := range Families {
			for _, b := range builds {
				r := releaseOf(f, v, b)
				c.byID[r.ImageID] = r
			}
		}
	}
	return c
}

// KubernetesVersions are the versions the catalog holds, in the order given.
func (c *ReleaseCatalog) KubernetesVersions() []string { return slices.Clone(c.versions) }

// Releases lists a Kubernetes version's releases: by family in Families' order, the
// oldest first. None for a version the catalog does not hold.
func (c *ReleaseCatalog) Releases(kubernetesVersion string) []Release {
	if !slices.Contains(c.versions, kubernetesVersion) {
		return nil
	}
	var out []Release
	for _, f := range Families {
		for _, b := range builds {
			out = append(out, releaseOf(f, kubernetesVersion, b))
		}
	}
	return out
}

// All lists every release of every version, sorted by image ID.
func (c *ReleaseCatalog) All() []Release {
	out := make([]Release, 0, len(c.byID))
	for _, r := range c.byID {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Release) int { return strings.Compare(a.ImageID, b.ImageID) })
	return out
}

// Latest is a family's latest release for a Kubernetes version.
func (c *ReleaseCatalog) Latest(kubernetesVersion, family string) (Release, bool) {
	if !slices.Contains(c.versions, kubernetesVersion) || !slices.Contains(Families, family) {
		return Release{}, false
	}
	return releaseOf(family, kubernetesVersion, builds[len(builds)-1]), true
}

// ByImageID finds the release of an image.
func (c *ReleaseCatalog) ByImageID(id string) (Release, bool) {
	r, ok := c.byID[id]
	return r, ok
}

// ByReleaseVersion finds a family's release by the release version EKS reports. A
// Bottlerocket release version names no Kubernetes version, so kubernetesVersion picks
// one; "" takes the newest version the release exists for (the last given).
func (c *ReleaseCatalog) ByReleaseVersion(kubernetesVersion, family, releaseVersion string) (Release, bool) {
	for _, v := range slices.Backward(c.versions) {
		if kubernetesVersion != "" && v != kubernetesVersion {
			continue
		}
		for _, b := range builds {
			if r := releaseOf(family, v, b); r.ReleaseVersion == releaseVersion && slices.Contains(Families, family) {
				return r, true
			}
		}
	}
	return Release{}, false
}
