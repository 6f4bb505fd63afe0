package bench

import (
	"bufio"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Percentiles summarises a latency distribution in milliseconds.
type Percentiles struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
	// N is how many samples there were.
	N int `json:"n"`
}

// percentiles computes nearest-rank percentiles of durations, in milliseconds rounded
// to a tenth.
func percentiles(d []time.Duration) Percentiles {
	if len(d) == 0 {
		return Percentiles{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return Percentiles{P50: ms(rank(s, 50)), P90: ms(rank(s, 90)), P99: ms(rank(s, 99)), Max: ms(s[len(s)-1]), N: len(s)}
}

// rank is the nearest-rank p-th percentile of sorted samples: the smallest sample that
// at least p percent of the samples do not exceed.
func rank(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) float64 { return round(float64(d)/float64(time.Millisecond), 1) }

func seconds(d time.Duration) float64 { return round(d.Seconds(), 2) }

// round rounds x to the given decimals, so that reports are stable and readable.
func round(x float64, decimals int) float64 {
	p := math.Pow(10, float64(decimals))
	return math.Round(x*p) / p
}

// perNode divides a count by the number of nodes.
func perNode(count float64, nodes int) float64 {
	if nodes == 0 {
		return 0
	}
	return round(count/float64(nodes), 2)
}

// ratio is a/b, or 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return round(a/b, 2)
}

// sample is one Prometheus text-format sample: its name, labels and value.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// parseMetrics reads the Prometheus text exposition format, keeping the samples whose
// name is in want (all when want is empty).
func parseMetrics(r io.Reader, want ...string) ([]sample, error) {
	var out []sample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s, ok := parseSample(line)
		if !ok || (len(want) > 0 && !slices.Contains(want, s.name)) {
			continue
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

func parseSample(line string) (sample, bool) {
	var s sample
	var rest string
	if i := strings.IndexAny(line, "{ "); i > 0 && line[i] == '{' {
		s.name = line[:i]
		end := strings.LastIndexByte(line, '}')
		if end < i {
			return s, false
		}
		s.labels = parseLabels(line[i+1 : end])
		rest = line[end+1:]
	} else if i > 0 {
		s.name, rest = line[:i], line[i:]
	} else {
		return s, false
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return s, false
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return s, false
	}
	s.value = v
	return s, true
}

// parseLabels reads name="value" pairs; values may hold escaped quotes and commas.
func parseLabels(text string) map[string]string {
	out := map[string]string{}
	for len(text) > 0 {
		eq := strings.IndexByte(text, '=')
		if eq < 0 || eq+1 >= len(text) || text[eq+1] != '"' {
			return out
		}
		name := strings.TrimSpace(strings.TrimPrefix(text[:eq], ","))
		var val strings.Builder
		i := eq + 2
		for ; i < len(text) && text[i] != '"'; i++ {
			if text[i] == '\\' && i+1 < len(text) {
				i++
			}
			val.WriteByte(text[i])
		}
		out[name] = val.String()
		text = strings.TrimPrefix(text[min(i+1, len(text)):], ",")
	}
	return out
}

// sum adds up the samples of one name.
func sum(samples []sample, name string) float64 {
	var t float64
	for _, s := range samples {
		if s.name == name {
			t += s.value
		}
	}
	return t
}

// histogramQuantile estimates the q-quantile (0..1) of a Prometheus histogram from its
// cumulative _bucket samples (all label sets other than le added up), interpolating
// linearly inside the bucket, as PromQL's histogram_quantile does. It returns 0 when
// the histogram is empty.
func histogramQuantile(samples []sample, bucketName string, q float64) float64 { //nolint:unparam // the metric is named at the call, where the figure is reported
	counts := map[float64]float64{}
	for _, s := range samples {
		if s.name != bucketName {
			continue
		}
		le, err := strconv.ParseFloat(s.labels["le"], 64)
		if err != nil {
			continue
		}
		counts[le] += s.value
	}
	bounds := make([]float64, 0, len(counts))
	for le := range counts {
		bounds = append(bounds, le)
	}
	sort.Float64s(bounds)
	if len(bounds) == 0 {
		return 0
	}
	total := counts[bounds[len(bounds)-1]]
	if total == 0 {
		return 0
	}
	target := q * total
	prevBound, prevCount := 0.0, 0.0
	for _, le := range bounds {
		c := counts[le]
		if c >= target {
			if math.IsInf(le, 1) {
				// Above the highest finite bound: report that bound.
				return prevBound
			}
			if c == prevCount {
				return le
			}
			return prevBound + (le-prevBound)*(target-prevCount)/(c-prevCount)
		}
		prevBound, prevCount = le, c
	}
	return prevBound
}

// counter follows a counter across samples taken over time, adding up the increases
// even when the process behind it restarted (the counter fell back to zero).
type counter struct {
	last, total float64
	started     bool
	// restarted is set once the counter went backwards (its source restarted).
	restarted bool
}

// byCall sums apiserver_request_total samples by verb and resource (with the
// subresource, when there is one): "PUT certificatesigningrequests/approval".
func byCall(samples []sample) map[string]float64 {
	out := map[string]float64{}
	for _, s := range samples {
		if s.name != "apiserver_request_total" {
			continue
		}
		call := s.labels["verb"] + " " + s.labels["resource"]
		if sub := s.labels["subresource"]; sub != "" {
			call += "/" + sub
		}
		out[call] += s.value
	}
	return out
}

// callsPerNode returns, by call, how many requests were made between before and
// after, per node; calls that made none are left out.
func callsPerNode(before, after map[string]float64, n int) map[string]float64 {
	out := map[string]float64{}
	for call, v := range after {
		if d := v - before[call]; d > 0 {
			out[call] = perNode(d, n)
		}
	}
	return out
}

// total adds up every call's requests.
func total(calls map[string]float64) float64 {
	var t float64
	for _, v := range calls {
		t += v
	}
	return t
}

func (c *counter) observe(v float64) {
	switch {
	case !c.started:
		c.started = true
	case v >= c.last:
		c.total += v - c.last
	default:
		c.total += v // reset: everything since the restart is new
		c.restarted = true
	}
	c.last = v
}
