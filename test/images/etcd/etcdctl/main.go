// Command etcdctl is etcd's command line client (go.etcd.io/etcd/etcdctl/v3),
// shipped in the etcd test image so tests can write keys with `docker exec`.
package main

import (
	"go.etcd.io/etcd/etcdctl/v3/ctlv3"
)

func main() {
	ctlv3.MustStart()
}
