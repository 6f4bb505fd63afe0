package template

import (
	"math/big"
	"net/netip"
)

// cidr evaluates Fn::Cidr [ipBlock, count, cidrBits]: the first count subnets of
// ipBlock that have cidrBits host bits each (a /24 has 8), in address order.
func (e *evaluator) cidr(arg any, path string) (any, error) {
	args, ok := list(arg, 3)
	if !ok {
		return nil, templateError(path, "Fn::Cidr requires a list argument with three elements")
	}
	var s [3]string
	for i, a := range args {
		v, err := e.str(a, index(path, i), "Fn::Cidr's arguments")
		if err != nil {
			return nil, err
		}
		s[i] = v
	}
	block, err := netip.ParsePrefix(s[0])
	if err != nil {
		return nil, templateError(index(path, 0), "Fn::Cidr's IP block %s is not a CIDR block such as 10.0.0.0/16", s[0])
	}
	block = block.Masked()
	count, err1 := atoi(s[1])
	bits, err2 := atoi(s[2])
	total := block.Addr().BitLen()
	newLen := total - bits
	if err1 != nil || count < 1 || count > 256 {
		return nil, templateError(index(path, 1), "Fn::Cidr's count must be an integer from 1 to 256")
	}
	if err2 != nil || bits < 0 || newLen < block.Bits() {
		return nil, templateError(index(path, 2), "Fn::Cidr's cidrBits must be an integer from 0 to %d for the block %s", total-block.Bits(), s[0])
	}
	if available := newLen - block.Bits(); available < 16 && count > 1<<available {
		return nil, templateError(index(path, 1), "Fn::Cidr cannot make %d subnets of %d host bits in %s", count, bits, s[0])
	}
	raw := block.Addr().AsSlice()
	base := new(big.Int).SetBytes(raw)
	step := new(big.Int).Lsh(big.NewInt(1), uint(bits))
	out := make([]any, 0, count)
	for i := range count {
		n := new(big.Int).Add(base, new(big.Int).Mul(step, big.NewInt(int64(i))))
		buf := n.FillBytes(make([]byte, len(raw)))
		addr, _ := netip.AddrFromSlice(buf)
		out = append(out, netip.PrefixFrom(addr, newLen).String())
	}
	return out, nil
}
