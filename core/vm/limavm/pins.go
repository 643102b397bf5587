package limavm

// This file is the one place where the versions and checksums of everything
// the VM downloads are pinned. Updating a tool means editing its entry here
// (version, URLs and SHA-256 together) and running
// `go test ./core/vm/lima/ -update` to refresh the golden files.
//
// Provenance of the values below (checked when they were written; none could
// be downloaded from the build machine, which only reaches the Go module
// proxy):
//   - Ubuntu images: Lima's own template templates/_images/ubuntu-24.04.yaml,
//     with Lima's digests: release-20260705 from Lima v2.2.0 (the version
//     marina builds with; TestDefaultImagesMatchLimaTemplate re-checks it
//     against the Lima module in the module cache), release-20260615 and
//     release-20260518 from the two template updates before it (lima-vm/lima
//     commits e4f1ae44 and d8400863). Ubuntu removes dated releases after
//     some months; Lima tries the images of an architecture in order, so the
//     newest that still exists is used, and every one is verified against
//     its digest. When all are gone, add the newer dated release from Lima's
//     template here (newest first).
//   - kind v0.33.0: the SHA-256 published next to each release asset
//     (kind-linux-<arch>.sha256sum), as quoted by several independent public
//     repositories that verify them.
//   - kubectl v1.37.1: https://dl.k8s.io/release/v1.37.1/bin/linux/<arch>/kubectl.sha256,
//     as quoted by several independent public repositories.
//   - docker.io: deliberately not pinned to a version. Ubuntu keeps only the
//     newest version of a package in noble-updates, so an exact pin stops
//     resolving as soon as Ubuntu publishes a newer one ("Version ... not
//     found"), and every new VM fails. apt verifies the package against the
//     signed archive; the provisioning records the version it installed in
//     /var/lib/marina/versions in the VM and prints it once.

// Versions of the tools installed in the VM.
const (
	// KindVersion is the kind CLI installed in the VM; it matches the kind
	// library marina builds against (sigs.k8s.io/kind).
	KindVersion = "v0.33.0"
	// KubectlVersion is the kubectl installed in the VM (within one minor
	// version of kind's default node image).
	KubectlVersion = "v1.37.1"
	// DockerPackage is the Ubuntu package that provides the Docker engine
	// (whatever version the archive has; see above).
	DockerPackage = "docker.io"
)

// ubuntuImage is the Ubuntu 24.04 LTS ("noble") server cloud image of one
// dated release for one architecture.
func ubuntuImage(arch, release, digest string) Image {
	return Image{
		Arch:     arch,
		Location: "https://cloud-images.ubuntu.com/releases/noble/release-" + release + "/ubuntu-24.04-server-cloudimg-" + arch + ".img",
		Digest:   digest,
	}
}

// DefaultImages are the Ubuntu 24.04 LTS ("noble") server cloud images the
// VM boots, several dated releases per architecture, newest first, each
// pinned by digest: Lima tries them in order and uses the first it can
// download and verify, so one release removed from Ubuntu's servers does
// not stop new VMs.
func DefaultImages() []Image {
	return []Image{
		ubuntuImage("amd64", "20260705", "sha256:ffe6203da54deeb6db5d2a98a83f9ec8e55f149d3f7ba622e1abe5fa966ee3d6"),
		ubuntuImage("arm64", "20260705", "sha256:7df0201546f75b8bcc1044594c806c35749421ad3c9bc1be2a3ab806cfae39cc"),
		ubuntuImage("amd64", "20260615", "sha256:5fa5b05e5ec239858c4531485d6023b0896448c2df7c63b34f8dae6ea6051a44"),
		ubuntuImage("arm64", "20260615", "sha256:cafa1a965b591b7c4184b484ffd8e625981a79d48f9b4ae8a4adf7b4c5ade927"),
		ubuntuImage("amd64", "20260518", "sha256:53fdde898feed8b027d94baa9cfe8229867f330a1d9c49dc7d84465ee7f229f7"),
		ubuntuImage("arm64", "20260518", "sha256:6a61b967ba4a27dd1966f835a67643073ed55c2860ce3dc1cb0517282e6b8bec"),
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
