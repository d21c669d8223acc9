// Command etcd is the etcd server, built from go.etcd.io/etcd/server/v3 at the
// version pinned in this module's go.mod, for the local control plane.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
