package autoscaling

import (
	"cmp"
	"maps"
	"slices"
	"strings"
)

// This file holds the XML of Auto Scaling's answers.

type asgLTXML struct {
	LaunchTemplateID   string `xml:"LaunchTemplateId,omitempty"`
	LaunchTemplateName string `xml:"LaunchTemplateName,omitempty"`
	Version            string `xml:"Version,omitempty"`
}

type asgInstanceXML struct {
	InstanceID           string    `xml:"InstanceId"`
	InstanceType         string    `xml:"InstanceType"`
	AvailabilityZone     string    `xml:"AvailabilityZone"`
	LifecycleState       string    `xml:"LifecycleState"`
	HealthStatus         string    `xml:"HealthStatus"`
	LaunchTemplate       *asgLTXML `xml:"LaunchTemplate,omitempty"`
	ProtectedFromScaleIn bool      `xml:"ProtectedFromScaleIn"`
}

type asgTagXML struct {
	ResourceID        string `xml:"ResourceId"`
	ResourceType      string `xml:"ResourceType"`
	Key               string `xml:"Key"`
	Value             string `xml:"Value"`
	PropagateAtLaunch bool   `xml:"PropagateAtLaunch"`
}

type asgMIPXML struct {
	LaunchTemplate struct {
		LaunchTemplateSpecification asgLTXML `xml:"LaunchTemplateSpecification"`
		Overrides                   []struct {
			InstanceType     string `xml:"InstanceType,omitempty"`
			WeightedCapacity string `xml:"WeightedCapacity,omitempty"`
		} `xml:"Overrides>member"`
	} `xml:"LaunchTemplate"`
	InstancesDistribution struct {
		OnDemandAllocationStrategy          string  `xml:"OnDemandAllocationStrategy,omitempty"`
		OnDemandBaseCapacity                int64   `xml:"OnDemandBaseCapacity"`
		OnDemandPercentageAboveBaseCapacity int64   `xml:"OnDemandPercentageAboveBaseCapacity"`
		SpotAllocationStrategy              string  `xml:"SpotAllocationStrategy,omitempty"`
		SpotInstancePools                   int64   `xml:"SpotInstancePools"`
		SpotMaxPrice                        *string `xml:"SpotMaxPrice,omitempty"`
	} `xml:"InstancesDistribution"`
}

type asgGroupXML struct {
	AutoScalingGroupName             string           `xml:"AutoScalingGroupName"`
	AutoScalingGroupARN              string           `xml:"AutoScalingGroupARN"`
	LaunchTemplate                   *asgLTXML        `xml:"LaunchTemplate,omitempty"`
	MixedInstancesPolicy             *asgMIPXML       `xml:"MixedInstancesPolicy,omitempty"`
	MinSize                          int64            `xml:"MinSize"`
	MaxSize                          int64            `xml:"MaxSize"`
	DesiredCapacity                  int64            `xml:"DesiredCapacity"`
	DefaultCooldown                  int64            `xml:"DefaultCooldown"`
	AvailabilityZones                []string         `xml:"AvailabilityZones>member"`
	HealthCheckType                  string           `xml:"HealthCheckType"`
	HealthCheckGracePeriod           int64            `xml:"HealthCheckGracePeriod"`
	Instances                        []asgInstanceXML `xml:"Instances>member"`
	CreatedTime                      string           `xml:"CreatedTime"`
	VPCZoneIdentifier                string           `xml:"VPCZoneIdentifier,omitempty"`
	Status                           string           `xml:"Status,omitempty"`
	Tags                             []asgTagXML      `xml:"Tags>member"`
	TerminationPolicies              []string         `xml:"TerminationPolicies>member"`
	NewInstancesProtectedFromScaleIn bool             `xml:"NewInstancesProtectedFromScaleIn"`
	CapacityRebalance                bool             `xml:"CapacityRebalance"`
}

type activityXML struct {
	ActivityID            string `xml:"ActivityId"`
	AutoScalingGroupName  string `xml:"AutoScalingGroupName"`
	AutoScalingGroupARN   string `xml:"AutoScalingGroupARN"`
	Description           string `xml:"Description"`
	Cause                 string `xml:"Cause"`
	StartTime             string `xml:"StartTime"`
	EndTime               string `xml:"EndTime,omitempty"`
	StatusCode            string `xml:"StatusCode"`
	StatusMessage         string `xml:"StatusMessage,omitempty"`
	Progress              int    `xml:"Progress"`
	Details               string `xml:"Details"`
	AutoScalingGroupState string `xml:"AutoScalingGroupState"`
}

func (act *activity) xml() activityXML {
	x := activityXML{ActivityID: act.id, AutoScalingGroupName: act.group, AutoScalingGroupARN: act.groupARN, Description: act.description,
		Cause: act.cause, StartTime: act.start.Format(timeFormat), StatusCode: act.status, StatusMessage: act.message,
		Progress: act.progress, Details: act.details, AutoScalingGroupState: "InService"}
	if !act.end.IsZero() {
		x.EndTime = act.end.Format(timeFormat)
	}
	if act.groupDeleted {
		x.AutoScalingGroupState = "Deleted"
	}
	return x
}

func (s ltSpec) xml() *asgLTXML {
	return &asgLTXML{LaunchTemplateID: s.ID, LaunchTemplateName: s.Name, Version: s.Version}
}

func (g *asGroup) xml(withInstances bool) asgGroupXML {
	x := asgGroupXML{AutoScalingGroupName: g.name, AutoScalingGroupARN: g.arn, MinSize: g.min, MaxSize: g.max, DesiredCapacity: g.desired,
		DefaultCooldown: g.cooldown, AvailabilityZones: slices.Clone(g.zones), HealthCheckType: g.healthCheckType,
		HealthCheckGracePeriod: g.gracePeriod, CreatedTime: g.created.Format(timeFormat), VPCZoneIdentifier: strings.Join(g.subnets, ","),
		TerminationPolicies: slices.Clone(g.termination), NewInstancesProtectedFromScaleIn: g.protectNew, CapacityRebalance: g.capacityRebalance}
	if g.deleting {
		x.Status = "Delete in progress"
	}
	if g.lt != nil {
		x.LaunchTemplate = g.lt.xml()
	}
	if g.mip != nil {
		m := &asgMIPXML{}
		m.LaunchTemplate.LaunchTemplateSpecification = *g.mip.lt.xml()
		for _, o := range g.mip.overrides {
			m.LaunchTemplate.Overrides = append(m.LaunchTemplate.Overrides, struct {
				InstanceType     string `xml:"InstanceType,omitempty"`
				WeightedCapacity string `xml:"WeightedCapacity,omitempty"`
			}{o.InstanceType, o.WeightedCapacity})
		}
		d, in := g.mip.dist, &m.InstancesDistribution
		in.OnDemandAllocationStrategy = cmp.Or(d.OnDemandAllocationStrategy, "prioritized")
		in.SpotAllocationStrategy = cmp.Or(d.SpotAllocationStrategy, "lowest-price")
		in.OnDemandBaseCapacity, in.OnDemandPercentageAboveBaseCapacity, in.SpotInstancePools = 0, 100, 2
		if d.OnDemandBaseCapacity != nil {
			in.OnDemandBaseCapacity = *d.OnDemandBaseCapacity
		}
		if d.OnDemandPercentageAboveBaseCapacity != nil {
			in.OnDemandPercentageAboveBaseCapacity = *d.OnDemandPercentageAboveBaseCapacity
		}
		if d.SpotInstancePools != nil {
			in.SpotInstancePools = *d.SpotInstancePools
		}
		in.SpotMaxPrice = d.SpotMaxPrice
		x.MixedInstancesPolicy = m
	}
	for _, t := range g.tags {
		x.Tags = append(x.Tags, asgTagXML{ResourceID: g.name, ResourceType: "auto-scaling-group", Key: t.Key, Value: t.Value, PropagateAtLaunch: t.Propagate})
	}
	if withInstances {
		for _, id := range slices.Sorted(maps.Keys(g.instances)) {
			in := g.instances[id]
			x.Instances = append(x.Instances, asgInstanceXML{InstanceID: in.id, InstanceType: in.instanceType, AvailabilityZone: in.zone,
				LifecycleState: in.state, HealthStatus: in.health, LaunchTemplate: in.lt.xml(), ProtectedFromScaleIn: in.protected})
		}
	}
	return x
}
