// Package migrate owns `marina migrate`: taking over an installation of
// klimax, marina's predecessor ("klimax is now marina"), without losing
// anything the user has.
//
// NewPlan reads everything from files and changes nothing: klimax's
// ~/.klimax/config.yaml (read leniently, as klimax did, but every key it
// does not carry over is reported with the reason), the registry cache
// under ~/.klimax/registry-cache, the per-cluster kubeconfigs under
// ~/.kube/klimax, the contexts klimax merged into the user's kubeconfig,
// and klimax's Lima instance under ~/.klimax/<vm name> (its pid files tell
// whether it runs). Apply then carries out the plan; every step re-checks
// its preconditions, reports what it did, and is idempotent: a second run
// reports the file steps as already done.
//
// # Decisions
//
// Keys. Every klimax key is listed with its marina key, value and a note.
// A klimax value equal to klimax's own default is treated as that default,
// not as a choice (klimax writes its defaults into the file it creates), so
// marina's default applies; this matters only where the two differ:
// kind.nodeVersion and kind.metalLBVersion (marina pins the versions its kind
// library and manifests are tested with) and vm.name. network.kindBridgeCIDR
// becomes network.bridgeCIDR and kind.customDnsResolvers becomes
// kind.customDNSResolvers; a resolver entry without resolvers gets klimax's
// implicit 8.8.8.8 and 8.8.4.4 written out. A value marina's validation
// rejects (klimax checked less: a bridge that is not a /16, a mirror port
// among the API ports 7001-7099, a VM smaller than marina supports) is not
// carried: marina's default applies (a rejected mirror or resolver entry is
// dropped) and the note quotes the rule. Keys klimax does not know, which
// klimax silently ignored, are not carried either (they never had an effect);
// a key that only differs in case from a klimax key is named.
//
// The config file. Only settings that differ from marina's defaults are
// written, plus vm.name, each with its documentation and the klimax key it
// came from as comments; everything else keeps marina's defaults, so a later
// marina upgrade moves them along. Mirror credentials are written to the file
// (mode 0600), as klimax kept them in its own; they never appear in any
// output: a password shows as "(set)". An existing marina config with other
// content is not replaced unless Options.Force, which keeps the old file as
// <file>.bak; without Force, Apply refuses before changing anything.
//
// vm.name. Lima names an instance after its directory, and marina's Docker
// socket (~/.<name>.docker.sock) and Docker context follow the name, so a VM
// that is adopted (now, after `klimax down`, or after the user moves it across
// filesystems) keeps klimax's name. When there is no VM to adopt, or it must
// be recreated (not a Lima instance, or a path too long for Lima's sockets),
// marina's default name "marina" is used, unless klimax's name was a custom
// one. The decision depends only on what is on disk, so a run after
// `klimax down` or after the move writes the same config again.
//
// The VM. klimax's VM lives in LIMA_HOME ~/.klimax; marina's LIMA_HOME is
// ~/.marina/lima, so adopting means moving the instance directory. That is
// done only when the VM is stopped: no pid file of Lima's (ha.pid, <driver>.pid)
// names a live process. A pid file that cannot be read means the state is
// unknown, and the plan says "stop it first: klimax down". The directory is
// renamed, never copied (its disks are large sparse files); when ~/.klimax
// and ~/.marina are on different filesystems, or the new path is too long
// for Lima's sockets, or marina already has a VM of that name, the plan says
// exactly what to do instead. With the registry cache on the host, the
// instance's lima.yaml is edited to share ~/.marina/registry-cache instead of
// klimax's cache (the only path in it that names ~/.klimax). What runs inside
// the VM cannot be taken over: klimax's clusters carry no marina slot label
// and klimax created the `kind` network without the ip-range marina
// requires, so klimax's cluster and mirror containers must be removed before
// `marina up` can recreate the network, and the clusters recreated with
// marina; the plan lists the exact commands.
//
// Files. The registry cache moves mirror by mirror
// (~/.klimax/registry-cache/<mirror> to ~/.marina/registry-cache/<mirror>):
// a rename on one filesystem, otherwise a copy that is verified file by file
// (size and SHA-256) before it is renamed into place and the original is
// removed; a target that exists and is not empty is left alone and
// reported. The cache is not moved while klimax's VM runs (its mirrors write
// to it). Per-cluster kubeconfigs are copied (mode 0600, atomically) to
// ~/.kube/marina/<name>.kubeconfig and the originals kept; contexts klimax
// merged into ~/.kube/config keep their names and are reported, because
// marina never replaces or removes kubeconfig entries it did not write.
package migrate
