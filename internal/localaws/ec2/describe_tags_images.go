package ec2

// This file holds DescribeImages and DescribeTags: the images and tags of what the
// inventory and its launch templates hold.

import (
	"maps"
	"net/http"
	"regexp"
	"slices"

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

// image is an image DescribeImages lists: one the instances or launch templates name.
// The local cloud knows no more of it than its ID, which is also its name; it is the
// account's own, private, x86_64 HVM EBS-backed Linux machine image.
type image struct{ id string }

var imageFilters = map[string]func(im image, owner string) []string{
	"image-id":            func(im image, _ string) []string { return one(im.id) },
	"name":                func(im image, _ string) []string { return one(im.id) },
	"state":               func(image, string) []string { return one("available") },
	"owner-id":            func(_ image, owner string) []string { return one(owner) },
	"architecture":        func(image, string) []string { return one("x86_64") },
	"image-type":          func(image, string) []string { return one("machine") },
	"is-public":           func(image, string) []string { return one("false") },
	"root-device-type":    func(image, string) []string { return one("ebs") },
	"virtualization-type": func(image, string) []string { return one("hvm") },
}

type imageXML struct {
	ImageID            string `xml:"imageId"`
	ImageState         string `xml:"imageState"`
	ImageOwnerID       string `xml:"imageOwnerId"`
	IsPublic           bool   `xml:"isPublic"`
	Architecture       string `xml:"architecture"`
	ImageType          string `xml:"imageType"`
	Name               string `xml:"name"`
	RootDeviceType     string `xml:"rootDeviceType"`
	RootDeviceName     string `xml:"rootDeviceName"`
	VirtualizationType string `xml:"virtualizationType"`
	Hypervisor         string `xml:"hypervisor"`
	EnaSupport         bool   `xml:"enaSupport"`
	PlatformDetails    string `xml:"platformDetails"`
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
	ids := e.templates.snapshot().images
	e.mu.Lock()
	for _, rec := range e.instances {
		ids = append(ids, rec.ImageID)
	}
	e.mu.Unlock()
	known := map[string]image{}
	for _, id := range ids {
		known[id] = image{id}
	}
	// The images are the account's: Owner.N names it as self or by ID, or lists none.
	if len(owners) > 0 && !slices.Contains(owners, "self") && !slices.Contains(owners, e.AccountID) {
		known = map[string]image{}
	}
	page, next, aerr := describeSet[image]{
		keys:   slices.Sorted(maps.Keys(known)),
		get:    func(id string) (image, bool) { im, ok := known[id]; return im, ok },
		values: func(im image, name string) []string { return imageFilters[name](im, e.AccountID) },
		notFound: func(ids []string) *protocol.Error {
			return protocol.Errorf(http.StatusBadRequest, "InvalidAMIID.NotFound", "The image id '[%s]' does not exist", ids[0])
		},
	}.page(in)
	if aerr != nil {
		return nil, aerr
	}
	var out []imageXML
	for _, im := range page {
		out = append(out, imageXML{ImageID: im.id, ImageState: "available", ImageOwnerID: e.AccountID, Architecture: "x86_64",
			ImageType: "machine", Name: im.id, RootDeviceType: "ebs", RootDeviceName: "/dev/xvda", VirtualizationType: "hvm",
			Hypervisor: "xen", EnaSupport: true, PlatformDetails: "Linux/UNIX"})
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
	page, next, _ := describeSet[tagRow]{
		keys:   slices.Sorted(maps.Keys(rows)),
		get:    func(k string) (tagRow, bool) { t, ok := rows[k]; return t, ok },
		tags:   func(t tagRow) map[string]string { return t.tags },
		values: func(t tagRow, name string) []string { return tagFilters[name](t) },
	}.page(in)
	var out []tagDescriptionXML
	for _, t := range page {
		out = append(out, tagDescriptionXML{ResourceID: t.resourceID, ResourceType: t.resourceType, Key: t.key, Value: t.value})
	}
	return newDescribeOutput(r, "tagSet", out, next), nil
}
