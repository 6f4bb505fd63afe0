package instancetypes

import (
	"testing"
)

// The max-pods vectors of the reference (§5.1): enis·(ips−1)+2, default card only.
func TestStandardMaxPods(t *testing.T) {
	if _, err := Parse(table); err != nil {
		t.Fatalf("embedded table: %v", err)
	}
	want := map[string]int{
		"t3.nano": 4, "t3.micro": 4, "t2.micro": 4, "t4g.nano": 4, "a1.medium": 8, "c6g.medium": 8, "t3.small": 11,
		"t3.medium": 17, "t3.large": 35, "m5.large": 29, "r5.large": 29, "m6i.large": 29, "c5.large": 29,
		"m4.xlarge": 58, "m5.xlarge": 58, "m5.2xlarge": 58, "m7g.xlarge": 58, "m5.4xlarge": 234, "m5.8xlarge": 234,
		"c6in.32xlarge": 394, "g5.48xlarge": 345, "trn1.32xlarge": 247, "p5.48xlarge": 100, "hpc7a.96xlarge": 100,
		"m5.24xlarge": 737, "c5.18xlarge": 737, "m6i.32xlarge": 737, "p4d.24xlarge": 737, "c7g.16xlarge": 737,
	}
	for typ, pods := range want {
		info, ok := Lookup(typ)
		if !ok {
			t.Errorf("%s missing from the table", typ)
			continue
		}
		if got := info.StandardMaxPods(); got != pods {
			t.Errorf("%s: max pods %d, want %d", typ, got, pods)
		}
	}
	if _, ok := Lookup("mock-type.large"); ok {
		t.Error("unknown type found")
	}
}

func TestParseRejectsBadLines(t *testing.T) {
	for _, bad := range []string{"m5.large\t3", "m5.large\tx\t10", "m5.large\t0\t10", "a\t1\t2\na\t1\t2"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
}
