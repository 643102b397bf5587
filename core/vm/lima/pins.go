package lima

// This file is the one place where the versions and checksums of everything
// the VM downloads are pinned. Updating a tool means editing its entry here
// (version, URLs and SHA-256 together) and running
// `go test ./core/vm/lima/ -update` to refresh the golden files.
//
// Provenance of the values below (checked when they were written; none could
// be downloaded from the build machine, which only reaches the Go module
// proxy):
//   - Ubuntu images: Lima v2.2.0's own template templates/_images/ubuntu-24.04.yaml
//     (the release-20260705 entries, with Lima's digests).
//     TestDefaultImagesMatchLimaTemplate re-checks them against the Lima
//     module in the module cache.
//   - kind v0.33.0: the SHA-256 published next to each release asset
//     (kind-linux-<arch>.sha256sum), as quoted by several independent public
//     repositories that verify them.
//   - kubectl v1.37.1: https://dl.k8s.io/release/v1.37.1/bin/linux/<arch>/kubectl.sha256,
//     as quoted by several independent public repositories.
//   - docker.io: the version Ubuntu 24.04 (noble-updates) carried in 2026; apt
//     verifies the package against the signed archive. Ubuntu keeps only the
//     newest version of a package in noble-updates, so when Ubuntu publishes a
//     newer docker.io this pin stops resolving and provisioning stops with an
//     error that points here: bump it to the version `apt-cache policy docker.io`
//     shows in a noble VM.

// Versions of the tools installed in the VM.
const (
	// KindVersion is the kind CLI installed in the VM; it matches the kind
	// library marina builds against (sigs.k8s.io/kind).
	KindVersion = "v0.33.0"
	// KubectlVersion is the kubectl installed in the VM (within one minor
	// version of kind's default node image).
	KubectlVersion = "v1.37.1"
	// DockerPackage is the Ubuntu package that provides the Docker engine.
	DockerPackage = "docker.io"
	// DockerPackageVersion is the exact Debian version of DockerPackage.
	DockerPackageVersion = "29.1.3-0ubuntu3~24.04.2"
)

// DefaultImages are the Ubuntu 24.04 LTS ("noble") server cloud images the
// VM boots, one per architecture, each pinned by digest.
func DefaultImages() []Image {
	return []Image{
		{
			Arch:     "amd64",
			Location: "https://cloud-images.ubuntu.com/releases/noble/release-20260705/ubuntu-24.04-server-cloudimg-amd64.img",
			Digest:   "sha256:ffe6203da54deeb6db5d2a98a83f9ec8e55f149d3f7ba622e1abe5fa966ee3d6",
		},
		{
			Arch:     "arm64",
			Location: "https://cloud-images.ubuntu.com/releases/noble/release-20260705/ubuntu-24.04-server-cloudimg-arm64.img",
			Digest:   "sha256:7df0201546f75b8bcc1044594c806c35749421ad3c9bc1be2a3ab806cfae39cc",
		},
	}
}

// DefaultBinaries are the tools the guest downloads into /usr/local/bin,
// each verified against its SHA-256 before it is installed.
func DefaultBinaries() []Binary {
	return []Binary{
		{
			Name:    "kind",
			Version: KindVersion,
			Files: map[string]File{
				"amd64": {
					URL:    "https://github.com/kubernetes-sigs/kind/releases/download/" + KindVersion + "/kind-linux-amd64",
					SHA256: "aee6151561422756b764a4ae28e7f44cda5af5a9eead3cc9985112b1de8d8e0d",
				},
				"arm64": {
					URL:    "https://github.com/kubernetes-sigs/kind/releases/download/" + KindVersion + "/kind-linux-arm64",
					SHA256: "20022bee6cfcd5086cb7234d218e3454e6090022f2a8f55d1fa7fcf42c3867a2",
				},
			},
		},
		{
			Name:    "kubectl",
			Version: KubectlVersion,
			Files: map[string]File{
				"amd64": {
					URL:    "https://dl.k8s.io/release/" + KubectlVersion + "/bin/linux/amd64/kubectl",
					SHA256: "65691ff77eb6fa44c908b77a1082c9f092c3b9733b5cefabec0d1104890e21a8",
				},
				"arm64": {
					URL:    "https://dl.k8s.io/release/" + KubectlVersion + "/bin/linux/arm64/kubectl",
					SHA256: "ff749f4b78d9c4f1ec87307df9b50119ed819e2094aa9810cb9acffc3286c8c7",
				},
			},
		},
	}
}
