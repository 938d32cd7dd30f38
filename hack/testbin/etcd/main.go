// Command etcd is the upstream etcd server, built from the Go module proxy for
// TauGrid's tests and local cluster.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
