package ipamd

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/nodejoin/nodejoin/internal/netagent/ipamd/pool"
	"github.com/nodejoin/nodejoin/internal/nodeadm/nodeconfig/instancetypes"
)

// TestMaxPodsTable checks docs/network.md's max-pods table: each row's arithmetic,
// nodeadm's max pods for the type, and the limits the local cloud's
// DescribeInstanceTypes returns through the SDK (which ipamd uses) all agree.
func TestMaxPodsTable(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/network.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "### Max pods")
	if !ok {
		t.Fatal("docs/network.md has no Max pods section")
	}
	row := regexp.MustCompile(`(?m)^\| ([a-z0-9]+\.[a-z0-9]+) \| (\d+) \| (\d+) \| (\d+) × \((\d+) − 1\) \+ 2 = (\d+) \| (\d+) \|$`)
	rows := row.FindAllStringSubmatch(section, -1)
	if len(rows) != 3 {
		t.Fatalf("want 3 rows in the max-pods table, found %d", len(rows))
	}
	n := newLocalNode(t)
	for _, r := range rows {
		typ := r[1]
		num := func(i int) int { v, _ := strconv.Atoi(r[i]); return v }
		enis, ips, maxPods, podAddrs := num(2), num(3), num(6), num(7)
		if num(4) != enis || num(5) != ips {
			t.Errorf("%s: the formula uses %s and %s, the row %d and %d", typ, r[4], r[5], enis, ips)
		}
		lim := pool.Limits{ENIs: enis, IPv4PerENI: ips}
		if lim.MaxPods() != maxPods || enis*(ips-1) != podAddrs {
			t.Errorf("%s: %d × (%d − 1) + 2 = %d and %d pod addresses; the row says %d and %d", typ, enis, ips, lim.MaxPods(), enis*(ips-1), maxPods, podAddrs)
		}
		info, ok := instancetypes.Lookup(typ)
		if !ok || info.ENIs != enis || info.IPsPerENI != ips || info.StandardMaxPods() != maxPods {
			t.Errorf("%s: nodeadm's table says %+v (max pods %d); the row says %d ENIs of %d, max pods %d", typ, info, info.StandardMaxPods(), enis, ips, maxPods)
		}
		got, err := n.sdk.InstanceTypeLimits(t.Context(), typ)
		if err != nil || got != lim {
			t.Errorf("%s: DescribeInstanceTypes gives %+v, %v; the row says %+v", typ, got, err, lim)
		}
	}
}
