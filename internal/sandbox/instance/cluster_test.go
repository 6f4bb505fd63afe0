package instance

import "net/netip"

var testCluster = ClusterInfo{
	Name:        "demo",
	Endpoint:    "https://198.18.0.1:6443",
	CAPEM:       []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"),
	ServiceCIDR: netip.MustParsePrefix("10.100.0.0/16"),
}
