// Command referrers-registry serves go-containerregistry's registry
// (pkg/registry) with its referrers API enabled: `crane registry serve`
// builds the same registry without registry.WithReferrersSupport(true), so
// it answers GET /v2/<name>/referrers/<digest> with 404.
//
// What the registry does (go-containerregistry v0.22.1, pkg/registry):
// it lists, for a digest, the manifests of the repository whose `subject`
// names it, each with `artifactType` taken from the manifest's
// config.mediaType (not from its `artifactType` field) and with its
// annotations; it ignores the `artifactType` query (no
// OCI-Filters-Applied); it sends no `OCI-Subject` header when a manifest
// with a subject is put; its tag list honours `n` and `last` but sends no
// Link header. Manifests live in memory; blobs in memory, or under
// --blobs DIR.
//
//	referrers-registry [--listen 127.0.0.1:0] [--blobs DIR]
//
// prints `listening on HOST:PORT` on standard output once it accepts
// connections, and logs every request on standard error.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on (port 0: a free one)")
	blobs := flag.String("blobs", "", "keep blobs under this folder (default: in memory)")
	flag.Parse()

	handler := registry.NewInMemoryBlobHandler()
	if *blobs != "" {
		if err := os.MkdirAll(*blobs, 0o755); err != nil {
			log.Fatalf("referrers-registry: %v", err)
		}
		handler = registry.NewDiskBlobHandler(*blobs)
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("referrers-registry: listening on %s: %v", *listen, err)
	}
	fmt.Printf("listening on %s\n", l.Addr())
	srv := &http.Server{
		Handler: registry.New(
			registry.WithReferrersSupport(true),
			registry.WithBlobHandler(handler),
		),
		ReadHeaderTimeout: 10 * time.Second,
	}
	log.Fatal(srv.Serve(l))
}
