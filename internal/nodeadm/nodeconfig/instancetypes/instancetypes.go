// Package instancetypes ships the EC2 instance-type facts that max pods depends on: the
// network interfaces of each type's default network card and the IPv4 addresses each
// interface takes. The table is data (instance-types.tsv), embedded at build time.
package instancetypes

import (
	_ "embed"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/nodejoin/nodejoin/internal/nodeadm/nodeconfig"
)

//go:embed instance-types.tsv
var table string

var (
	once   sync.Once
	byName map[string]nodeconfig.ENIInfo
	errTab error
)

// Parse reads a table: '#' comment lines, then "type<TAB>enis<TAB>ips" lines.
func Parse(data string) (map[string]nodeconfig.ENIInfo, error) {
	out := map[string]nodeconfig.ENIInfo{}
	for i, line := range strings.Split(data, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			return nil, fmt.Errorf("instance-type table line %d: want 3 tab-separated fields, got %q", i+1, line)
		}
		enis, err1 := strconv.Atoi(f[1])
		ips, err2 := strconv.Atoi(f[2])
		if err1 != nil || err2 != nil || enis < 1 || ips < 1 {
			return nil, fmt.Errorf("instance-type table line %d: %q: ENIs and IPs must be positive numbers", i+1, line)
		}
		if _, dup := out[f[0]]; dup {
			return nil, fmt.Errorf("instance-type table line %d: %s listed twice", i+1, f[0])
		}
		out[f[0]] = nodeconfig.ENIInfo{ENIs: enis, IPsPerENI: ips}
	}
	return out, nil
}

// Lookup returns the facts of an instance type, and whether the table has it.
func Lookup(instanceType string) (nodeconfig.ENIInfo, bool) {
	once.Do(func() { byName, errTab = Parse(table) })
	if errTab != nil {
		return nodeconfig.ENIInfo{}, false
	}
	info, ok := byName[instanceType]
	return info, ok
}

// Names lists the table's instance types, sorted.
func Names() []string {
	once.Do(func() { byName, errTab = Parse(table) })
	return slices.Sorted(maps.Keys(byName))
}

// Len is the number of instance types in the table.
func Len() int {
	once.Do(func() { byName, errTab = Parse(table) })
	return len(byName)
}
