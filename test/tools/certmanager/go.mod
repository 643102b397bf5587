// The cert-manager version marina's tests build (test/tools/build.sh): its
// controller, from the root module github.com/cert-manager/cert-manager with
// cmd/controller of the same tag copied in (_overlay; see ../README.md). This
// module only pins the version and its checksum: build.sh builds in a copy of
// cert-manager's own module, with cert-manager's go.mod and go.sum.
module github.com/bcollard/marina/test/tools/certmanager

go 1.26.0

require github.com/cert-manager/cert-manager v1.21.1
