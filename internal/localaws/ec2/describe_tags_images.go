package ec2

// This file holds DescribeImages and DescribeTags: the images of the release catalog,
// and the images and tags of what the inventory and its launch templates hold.

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
)

// templateSnapshot is what DescribeImages and DescribeTags read of the launch
// templates: each template's tags by ID, and the images its versions name.
type templateSnapshot struct {
	tags   map[string]map[string]string
	images []string
}

// snapshot reads the templates; nil reads as none.
func (l *LaunchTemplates) snapshot() templateSnapshot {
	s := templateSnapshot{tags: map[string]map[string]string{}}
	if l == nil {
		return s
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, t := range l.byID {
		tags := map[string]string{}
		for _, tag := range t.tags {
			tags[tag.Key] = tag.Value
		}
		s.tags[id] = tags
		for _, v := range t.versions {
			if v.data.ImageID != "" {
				s.images = append(s.images, v.data.ImageID)
			}
		}
	}
	return s
}

var imageIDRE = regexp.MustCompile(`^ami-([0-9a-f]{8}|[0-9a-f]{17})$`)

// image is an image DescribeImages lists: a release of the catalog, public and owned by
// Amazon's account (alias amazon), or one the instances or launch templates name, of
// which the local cloud knows no more than its ID (also its name): the account's own,
// private, x86_64 HVM EBS-backed Linux machine image.
type image struct {
	id, name, description, owner, alias string
	public, windows                     bool
	created                             time.Time
}

func (im image) location() string {
	if im.alias != "" {
		return im.alias + "/" + im.name
	}
	return im.owner + "/" + im.name
}

var imageFilters = map[string]func(im image) []string{
	"image-id":            func(im image) []string { return one(im.id) },
	"name":                func(im image) []string { return one(im.name) },
	"description":         func(im image) []string { return one(im.description) },
	"state":               func(image) []string { return one("available") },
	"owner-id":            func(im image) []string { return one(im.owner) },
	"owner-alias":         func(im image) []string { return one(im.alias) },
	"architecture":        func(image) []string { return one("x86_64") },
	"image-type":          func(image) []string { return one("machine") },
	"is-public":           func(im image) []string { return one(strconv.FormatBool(im.public)) },
	"root-device-type":    func(image) []string { return one("ebs") },
	"virtualization-type": func(image) []string { return one("hvm") },
	"platform": func(im image) []string {
		if im.windows {
			return one("windows")
		}
		return nil
	},
}

// ebsXML is a block device's EBS volume, as the image's snapshot holds it.
type ebsXML struct {
	SnapshotID          string `xml:"snapshotId"`
	VolumeSize          int    `xml:"volumeSize"`
	DeleteOnTermination bool   `xml:"deleteOnTermination"`
	VolumeType          string `xml:"volumeType"`
	Encrypted           bool   `xml:"encrypted"`
}

type blockDeviceXML struct {
	DeviceName string `xml:"deviceName"`
	EBS        ebsXML `xml:"ebs"`
}

// blockDevices are an image's volumes: its root (which eksctl looks up by the image's
// rootDeviceName), and Bottlerocket's data volume.
func (im image) blockDevices(root string) []blockDeviceXML {
	snap := func(dev string) string {
		sum := sha256.Sum256([]byte("snapshot/" + im.id + dev))
		return "snap-" + hex.EncodeToString(sum[:])[:17]
	}
	size := 20
	switch {
	case im.windows:
		size = 50
	case strings.HasPrefix(im.name, "bottlerocket-"):
		size = 2
	}
	out := []blockDeviceXML{{root, ebsXML{snap(root), size, true, "gp3", false}}}
	if strings.HasPrefix(im.name, "bottlerocket-") {
		out = append(out, blockDeviceXML{"/dev/xvdb", ebsXML{snap("/dev/xvdb"), 20, true, "gp3", false}})
	}
	return out
}

type imageXML struct {
	ImageID            string                           `xml:"imageId"`
	ImageLocation      string                           `xml:"imageLocation"`
	ImageState         string                           `xml:"imageState"`
	ImageOwnerID       string                           `xml:"imageOwnerId"`
	CreationDate       string                           `xml:"creationDate,omitempty"`
	IsPublic           bool                             `xml:"isPublic"`
	Architecture       string                           `xml:"architecture"`
	ImageType          string                           `xml:"imageType"`
	Platform           string                           `xml:"platform,omitempty"`
	ImageOwnerAlias    string                           `xml:"imageOwnerAlias,omitempty"`
	Name               string                           `xml:"name"`
	Description        string                           `xml:"description,omitempty"`
	RootDeviceType     string                           `xml:"rootDeviceType"`
	RootDeviceName     string                           `xml:"rootDeviceName"`
	BlockDevices       protocol.ItemSet[blockDeviceXML] `xml:"blockDeviceMapping"`
	VirtualizationType string                           `xml:"virtualizationType"`
	Hypervisor         string                           `xml:"hypervisor"`
	EnaSupport         bool                             `xml:"enaSupport"`
	PlatformDetails    string                           `xml:"platformDetails"`
}

// images are the catalog's releases and the account's images by ID. A catalog image
// an instance runs stays the catalog's.
func (e *EC2) images() map[string]image {
	known := map[string]image{}
	if e.releases != nil {
		for _, r := range e.releases.All() {
			known[r.ImageID] = image{id: r.ImageID, name: r.Name, description: r.Description, owner: AmazonAccountID,
				alias: "amazon", public: true, windows: r.Family == FamilyWindows, created: r.CreationDate}
		}
	}
	ids := e.templates.snapshot().images
	e.mu.Lock()
	for _, rec := range e.instances {
		ids = append(ids, rec.ImageID)
	}
	e.mu.Unlock()
	for _, id := range ids {
		if _, ok := known[id]; !ok && id != "" {
			known[id] = image{id: id, name: id, owner: e.AccountID}
		}
	}
	return known
}

// ownedBy tells whether an image is one Owner.N names: self or an account ID, or amazon
// (an alias).
func (e *EC2) ownedBy(im image, owners []string) bool {
	if len(owners) == 0 {
		return true
	}
	for _, o := range owners {
		if o == im.owner || o == "self" && im.owner == e.AccountID || im.alias != "" && o == im.alias {
			return true
		}
	}
	return false
}

func (e *EC2) describeImages(r *protocol.Request) (any, *protocol.Error) {
	owners := r.Params.StrList("Owner")
	r.Params.Ignore("ExecutableBy")
	in, aerr := readDescribe(r.Params, "ImageId", func(n string) bool { return imageFilters[n] != nil || isTagFilter(n) }, 6, 1000,
		"IncludeDeprecated", "IncludeDisabled")
	if aerr != nil {
		return nil, aerr
	}
	for _, id := range in.ids {
		if !imageIDRE.MatchString(id) {
			return nil, protocol.Errorf(http.StatusBadRequest, "InvalidAMIID.Malformed", "Invalid id: \"%s\" (expecting \"ami-...\")", id)
		}
	}
	if in.dry {
		return nil, errDryRun
	}
	known := e.images()
	notFound := func(ids []string) *protocol.Error {
		return protocol.Errorf(http.StatusBadRequest, "InvalidAMIID.NotFound", "The image id '[%s]' does not exist", ids[0])
	}
	// Owner.N narrows the listing; an image requested by ID but of another owner is
	// left out, as on AWS, not refused.
	listed := map[string]image{}
	for id, im := range known {
		if e.ownedBy(im, owners) {
			listed[id] = im
		}
	}
	if len(in.ids) > 0 {
		var ids, missing []string
		for _, id := range in.ids {
			if _, ok := known[id]; !ok {
				missing = append(missing, id)
			} else if _, ok := listed[id]; ok {
				ids = append(ids, id)
			}
		}
		if len(missing) > 0 {
			return nil, notFound(missing)
		}
		if len(ids) == 0 {
			return newDescribeOutput[imageXML](r, "imagesSet", nil, ""), nil
		}
		in.ids = ids
	}
	page, next, aerr := setOf(listed, func(im image, name string) []string { return imageFilters[name](im) },
		"InvalidAMIID.NotFound", "The image id '[%s]' does not exist").page(in)
	if aerr != nil {
		return nil, aerr
	}
	var out []imageXML
	for _, im := range page {
		x := imageXML{ImageID: im.id, ImageLocation: im.location(), ImageState: "available", ImageOwnerID: im.owner, IsPublic: im.public,
			Architecture: "x86_64", ImageType: "machine", ImageOwnerAlias: im.alias, Name: im.name, Description: im.description,
			RootDeviceType: "ebs", RootDeviceName: "/dev/xvda", VirtualizationType: "hvm", Hypervisor: "xen", EnaSupport: true,
			PlatformDetails: "Linux/UNIX"}
		if !im.created.IsZero() {
			x.CreationDate = im.created.UTC().Format(timeFormat)
		}
		if im.windows {
			x.Platform, x.PlatformDetails, x.RootDeviceName = "windows", "Windows", "/dev/sda1"
		}
		x.BlockDevices.Items = im.blockDevices(x.RootDeviceName)
		out = append(out, x)
	}
	return newDescribeOutput(r, "imagesSet", out, next), nil
}

// tagRow is one tag of one resource, as DescribeTags lists it.
type tagRow struct {
	resourceID, resourceType, key, value string
	// tags are all of the resource's tags, for tag:KEY and tag-key filters.
	tags map[string]string
}

var tagFilters = map[string]func(t tagRow) []string{
	"resource-id":   func(t tagRow) []string { return one(t.resourceID) },
	"resource-type": func(t tagRow) []string { return one(t.resourceType) },
	"key":           func(t tagRow) []string { return one(t.key) },
	"value":         func(t tagRow) []string { return []string{t.value} },
}

type tagDescriptionXML struct {
	ResourceID   string `xml:"resourceId"`
	ResourceType string `xml:"resourceType"`
	Key          string `xml:"key"`
	Value        string `xml:"value"`
}

// describeTags lists the tags of the instances, launch templates, network interfaces
// and subnets, by resource ID and key.
func (e *EC2) describeTags(r *protocol.Request) (any, *protocol.Error) {
	in, aerr := readDescribe(r.Params, "", func(n string) bool { return tagFilters[n] != nil || isTagFilter(n) }, 5, 1000)
	if aerr != nil {
		return nil, aerr
	}
	if in.dry {
		return nil, errDryRun
	}
	rows := map[string]tagRow{}
	add := func(id, kind string, tags map[string]string) {
		for k, v := range tags {
			rows[id+"\x00"+k] = tagRow{resourceID: id, resourceType: kind, key: k, value: v, tags: tags}
		}
	}
	for id, tags := range e.templates.snapshot().tags {
		add(id, "launch-template", tags)
	}
	e.mu.Lock()
	for id, rec := range e.instances {
		add(id, "instance", maps.Clone(rec.Tags))
	}
	for id, n := range e.enis {
		add(id, "network-interface", maps.Clone(n.Tags))
	}
	for id, s := range e.subnets {
		add(id, "subnet", maps.Clone(s.Tags))
	}
	e.mu.Unlock()
	page, next, _ := setOf(rows, func(t tagRow, name string) []string { return tagFilters[name](t) }, "", "").
		withTags(func(t tagRow) map[string]string { return t.tags }).page(in)
	var out []tagDescriptionXML
	for _, t := range page {
		out = append(out, tagDescriptionXML{ResourceID: t.resourceID, ResourceType: t.resourceType, Key: t.key, Value: t.value})
	}
	return newDescribeOutput(r, "tagSet", out, next), nil
}
