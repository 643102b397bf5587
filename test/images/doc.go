// Package images is the root of marina's test-image builder module.
//
// It is a separate Go module (github.com/bcollard/marina/test/images) so that the
// dependencies of the servers the tier-2 tests run — distribution's registry, etcd
// and CoreDNS — never enter marina's own go.mod. Each subdirectory holds a small main
// package and the Dockerfile of a FROM scratch image; build.sh compiles them
// statically and builds the images. See ../README.md.
package images
