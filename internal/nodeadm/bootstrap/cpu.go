package bootstrap

import (
	"os"
	"runtime"
	"strconv"
	"strings"
)

// onlineCPUMillis counts the host's online CPUs in millicores, from sysfs, as upstream
// nodeadm does; it falls back to the CPUs this process may use.
func onlineCPUMillis() int {
	data, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return runtime.NumCPU() * 1000
	}
	n, ok := countCPUList(strings.TrimSpace(string(data)))
	if !ok {
		return runtime.NumCPU() * 1000
	}
	return n * 1000
}

// countCPUList counts the CPUs of a sysfs list such as "0,2-4,6".
func countCPUList(list string) (int, bool) {
	n := 0
	for _, part := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return 0, false
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return 0, false
			}
		}
		n += b - a + 1
	}
	return n, n > 0
}
