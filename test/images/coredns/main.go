// Command coredns is CoreDNS with only the plugins marina's local DNS and the test
// node image's cluster DNS (kubernetes, loadbalance: kubeadm's Corefile) use. Linking
// twelve plugins instead of all of them halves the cold build and the binary, and
// serves a zone from etcd exactly like the full build.
//
// To add a plugin: import it below and add its name to directives, keeping the
// relative order of core/dnsserver/zdirectives.go (the order plugins run in).
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/etcd"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// directives is the subset of upstream's dnsserver.Directives, in upstream order.
// debug and prometheus are linked anyway (forward and cache import them), so their
// directives cost nothing and let a production-like Corefile load unchanged.
var directives = []string{
	"reload",
	"debug",
	"ready",
	"health",
	"prometheus",
	"errors",
	"log",
	"loadbalance",
	"cache",
	"hosts",
	"kubernetes",
	"etcd",
	"loop",
	"forward",
}

func main() {
	dnsserver.Directives = directives
	coremain.Run()
}
