package ec2

// This file holds DescribeInstanceTypeOfferings: where each instance type of the
// embedded table is offered. Every type is offered in the region and in each of its
// zones, as the local cloud launches any type anywhere; eksctl asks before it builds a
// node group's stack.

import (
	"net/http"

	"github.com/nodejoin/nodejoin/internal/localaws/protocol"
	"github.com/nodejoin/nodejoin/internal/nodeadm/nodeconfig/instancetypes"
)

type instanceTypeOfferingXML struct {
	InstanceType string `xml:"instanceType"`
	LocationType string `xml:"locationType"`
	Location     string `xml:"location"`
}

// offering is one instance type in one location.
type offering struct{ typ, location string }

func (e *EC2) describeInstanceTypeOfferings(r *protocol.Request) (any, *protocol.Error) {
	locType, _ := r.Params.Str("LocationType")
	if locType == "" {
		locType = "region"
	}
	var locations []string
	switch locType {
	case "region":
		locations = []string{e.Region}
	case "availability-zone":
		for _, z := range zoneLetters {
			locations = append(locations, e.Region+z)
		}
	case "availability-zone-id":
		for _, z := range zoneLetters {
			locations = append(locations, zoneID(e.Region+z))
		}
	default:
		return nil, protocol.Errorf(http.StatusBadRequest, "InvalidParameterValue",
			"Value (%s) for parameter locationType is invalid. Expected: 'region', 'availability-zone' or 'availability-zone-id'.", locType)
	}
	filters := map[string]func(o offering) []string{
		"instance-type": func(o offering) []string { return one(o.typ) },
		"location":      func(o offering) []string { return one(o.location) },
	}
	in, aerr := readDescribe(r.Params, "", func(n string) bool { return filters[n] != nil }, 5, 1000)
	if aerr != nil {
		return nil, aerr
	}
	if in.dry {
		return nil, errDryRun
	}
	all := map[string]offering{}
	var keys []string
	for _, typ := range instancetypes.Names() {
		for _, loc := range locations {
			k := typ + "/" + loc
			all[k] = offering{typ, loc}
			keys = append(keys, k)
		}
	}
	page, next, aerr := describeSet[offering]{
		keys:   keys,
		get:    func(k string) (offering, bool) { o, ok := all[k]; return o, ok },
		tags:   func(offering) map[string]string { return nil },
		values: func(o offering, f string) []string { return filters[f](o) },
	}.page(in)
	if aerr != nil {
		return nil, aerr
	}
	out := make([]instanceTypeOfferingXML, len(page))
	for i, o := range page {
		out[i] = instanceTypeOfferingXML{InstanceType: o.typ, LocationType: locType, Location: o.location}
	}
	return newDescribeOutput(r, "instanceTypeOfferingSet", out, next), nil
}
