// Command etcd is the etcd server of go.etcd.io/etcd/server/v3, built from this
// wrapper because `go install go.etcd.io/etcd/v3@v` is refused (the upstream main
// module has replace directives). It is exactly what upstream's main does.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
