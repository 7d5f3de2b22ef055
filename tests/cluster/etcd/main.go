// Wrapper main for the etcd server, built by tests/cluster/build.sh.
// etcd's own server module cannot be `go install`ed directly (its go.mod has
// replace directives), so we build this tiny module that calls its entrypoint.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
