package nodeconfig

import (
	"fmt"
	"math"
	"net"
	"strings"

	"cel.dev/cel-go/cel"
)

// DefaultMaxPods is the kubelet's own default, used when an instance type is unknown.
const DefaultMaxPods = 110

// ClusterDNS returns the cluster DNS address for a service CIDR as upstream nodeadm
// derives it: for IPv4, the CIDR's text up to its last '.' followed by ".10"; for IPv6,
// the address part followed by "a". Both match the address EKS gives CoreDNS.
func ClusterDNS(cidr string) (string, error) {
	ip, _, err := net.ParseCIDR(cidr)
	if err != nil {
		return "", fmt.Errorf("service CIDR %q: %w", cidr, err)
	}
	if ip.To4() != nil {
		return cidr[:strings.LastIndex(cidr, ".")] + ".10", nil
	}
	return strings.Split(cidr, "/")[0] + "a", nil
}

// ENIInfo is what max pods depends on: the network interfaces of the instance type's
// default network card and the IPv4 addresses each takes.
type ENIInfo struct {
	ENIs      int
	IPsPerENI int
}

// StandardMaxPods is EKS's formula: one address per ENI is the ENI's own, and two pods
// (the VPC CNI and kube-proxy) use the host network.
func (e ENIInfo) StandardMaxPods() int { return e.ENIs*(e.IPsPerENI-1) + 2 }

// MaxPods computes max pods for an instance: the standard value, or expression (CEL
// over default_enis, ips_per_eni and max_pods) when given. It returns the value and,
// when the expression could not be used, why; the standard value is then used, as
// upstream does.
func MaxPods(info ENIInfo, expression string) (int, error) {
	standard := info.StandardMaxPods()
	if expression == "" {
		return standard, nil
	}
	v, err := EvalMaxPods(expression, info)
	if err != nil {
		return standard, fmt.Errorf("maxPodsExpression %q: %w; using the standard value %d", expression, err, standard)
	}
	return v, nil
}

// EvalMaxPods evaluates a maxPodsExpression. The result must be an integer in
// 1..MaxInt32.
func EvalMaxPods(expression string, info ENIInfo) (int, error) {
	return evalMaxPods(expression, map[string]any{
		"default_enis": int64(info.ENIs),
		"ips_per_eni":  int64(info.IPsPerENI),
		"max_pods":     int64(info.StandardMaxPods()),
	})
}

// EvalConstantMaxPods evaluates a maxPodsExpression that needs no instance facts,
// such as "20"; one that refers to default_enis, ips_per_eni or max_pods fails.
func EvalConstantMaxPods(expression string) (int, error) {
	return evalMaxPods(expression, map[string]any{})
}

func evalMaxPods(expression string, vars map[string]any) (int, error) {
	env, err := cel.NewEnv(
		cel.Variable("default_enis", cel.IntType),
		cel.Variable("ips_per_eni", cel.IntType),
		cel.Variable("max_pods", cel.IntType),
	)
	if err != nil {
		return 0, err
	}
	ast, iss := env.Compile(expression)
	if iss.Err() != nil {
		return 0, fmt.Errorf("does not compile: %w", iss.Err())
	}
	prg, err := env.Program(ast)
	if err != nil {
		return 0, err
	}
	out, _, err := prg.Eval(vars)
	if err != nil {
		return 0, fmt.Errorf("evaluation failed: %w", err)
	}
	n, ok := out.Value().(int64)
	if !ok {
		return 0, fmt.Errorf("result %v is a %s, not an int", out.Value(), out.Type().TypeName())
	}
	if n <= 0 || n > math.MaxInt32 {
		return 0, fmt.Errorf("max pods value %d is invalid: want 1 to %d", n, math.MaxInt32)
	}
	return int(n), nil
}

// KubeReservedMemoryMi is the memory reserved for Kubernetes daemons: 11 MiB per pod
// plus 255 MiB.
func KubeReservedMemoryMi(maxPods int) int { return 11*maxPods + 255 }

// KubeReservedCPUMillis is the CPU reserved for Kubernetes daemons: 6 % of the first
// core, 1 % of the second, 0.5 % of the third and fourth, 0.25 % of every other.
func KubeReservedCPUMillis(totalMillis int) int {
	bounds := []int{0, 1000, 2000, 4000, totalMillis}
	hundredthsOfPercent := []int{600, 100, 50, 25}
	reserved := 0
	for i, pct := range hundredthsOfPercent {
		start, end := bounds[i], bounds[i+1]
		if totalMillis > start {
			reserved += (min(totalMillis, end) - start) * pct / 10000
		}
	}
	return reserved
}
