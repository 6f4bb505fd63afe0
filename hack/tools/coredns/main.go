// Command coredns is the CoreDNS server of nodejoin's local clusters, built from the
// pinned github.com/coredns/coredns module with only the plugins their Corefile uses.
//
// Plugins register themselves with the server when their package is imported; the
// order in which they handle a query is fixed by CoreDNS (core/dnsserver's directive
// list), not by this list or by the Corefile. A Corefile naming a plugin that is not
// imported here fails to load, so this list and the add-on's Corefile change together.
//
// forward is left out on purpose: a local cluster must never send a query out of the
// network namespaces nodejoin created (this machine's resolver lives outside them), so
// the Corefile answers names outside the cluster with an immediate NXDOMAIN from the
// template plugin instead of forwarding them.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"       // caches answers
	_ "github.com/coredns/coredns/plugin/errors"      // logs errors
	_ "github.com/coredns/coredns/plugin/health"      // liveness endpoint (:8080/health)
	_ "github.com/coredns/coredns/plugin/kubernetes"  // cluster.local from Services and EndpointSlices
	_ "github.com/coredns/coredns/plugin/loadbalance" // shuffles A/AAAA answers
	_ "github.com/coredns/coredns/plugin/log"         // query log
	_ "github.com/coredns/coredns/plugin/loop"        // stops on a forwarding loop
	_ "github.com/coredns/coredns/plugin/metrics"     // the prometheus directive (:9153)
	_ "github.com/coredns/coredns/plugin/ready"       // readiness endpoint (:8181/ready)
	_ "github.com/coredns/coredns/plugin/reload"      // re-reads a changed Corefile
	_ "github.com/coredns/coredns/plugin/template"    // NXDOMAIN for names outside the cluster
)

func main() { coremain.Run() }
