package resource

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The compute and EKS types read whatever properties a template holds: they never
// panic, and what they refuse they refuse in CloudFormation's words, at a path
// inside the resource.
func FuzzProperties(f *testing.F) {
	f.Add(uint8(0), []byte(`{"LaunchTemplateData":{"ImageId":"ami-1","MetadataOptions":{"HttpPutResponseHopLimit":"2"},"NetworkInterfaces":[{"DeviceIndex":"0","Groups":["sg-1"]}]}}`))
	f.Add(uint8(1), []byte(`{"MinSize":"1","MaxSize":"3","LaunchTemplate":{"LaunchTemplateId":"lt-1","Version":"1"},"Tags":[{"Key":"a","Value":"b","PropagateAtLaunch":"true"}]}`))
	f.Add(uint8(2), []byte(`{"AutoScalingRollingUpdate":{"PauseTime":"PT5M","MaxBatchSize":"2","WaitOnResourceSignals":"true"}}`))
	f.Add(uint8(3), []byte(`{"ClusterName":"demo","NodeRole":"r","Subnets":"subnet-1,subnet-2","Taints":[{"Key":"k","Effect":"NO_SCHEDULE"}],"Labels":{"a":1}}`))
	f.Add(uint8(4), []byte(`{"ClusterName":"demo","PrincipalArn":"r","AccessPolicies":[{"PolicyArn":"p","AccessScope":{"Type":"namespace","Namespaces":["a"]}}]}`))
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		var props map[string]any
		if json.Unmarshal(body, &props) != nil {
			return
		}
		c := &Call{LogicalID: "Fuzz", Properties: props, UpdatePolicy: props, Tags: map[string]string{"team": "infra"}}
		var err error
		switch kind % 5 {
		case 0:
			_, err = readLaunchTemplate(c, props)
		case 1:
			_, err = readASG(c, props)
		case 2:
			_, err = readRollingPolicy(c)
		case 3:
			_, err = readNodegroup(c, props)
		case 4:
			_, err = readAccessEntry(c, props)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "Properties validation failed for resource Fuzz with message: #") {
			t.Fatalf("refusal %q is not CloudFormation's", err)
		}
	})
}

// A PauseTime that parses is bounded (each part at most 3600) and says the same when
// written again.
func FuzzISODuration(f *testing.F) {
	for _, s := range []string{"PT5M", "PT1H30M", "PT0S", "PT", "P1D", "PT99999999999999999999S"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := parseISODuration(s)
		if !ok {
			return
		}
		if d < 0 || d > 3600*(time.Hour+time.Minute+time.Second) {
			t.Fatalf("%q parsed as %v", s, d)
		}
		again, ok := parseISODuration(isoOf(d))
		if !ok || again != d {
			t.Fatalf("%q parsed as %v, written %q, read back %v %v", s, d, isoOf(d), again, ok)
		}
	})
}

func isoOf(d time.Duration) string {
	h, m, sec := int(d/time.Hour), int(d%time.Hour/time.Minute), int(d%time.Minute/time.Second)
	return "PT" + strconv.Itoa(h) + "H" + strconv.Itoa(m) + "M" + strconv.Itoa(sec) + "S"
}
