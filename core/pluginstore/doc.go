// Package pluginstore owns marina's installed third-party plugins: the
// versioned on-disk store, installs from every supported source, the lock
// file, checksum verification and the description cache.
//
// # Layout
//
// The store root (DefaultRoot: ~/.marina/plugins) holds one directory per
// plugin, one per version below it and one per platform below that, so
// several versions (and, for Rosetta users, several platforms) live side by
// side:
//
//	~/.marina/plugins/
//	  acme/
//	    1.2.0/linux_amd64/marina-plugin-acme   the binary (0755)
//	    1.2.0/linux_amd64/manifest.json        what was installed (Installed as JSON)
//	    1.3.0/linux_amd64/...
//	  .cache/descriptions/<sha256>.json        descriptions keyed by binary digest
//	  .cache/digests/<path digest>.json        a binary's sha256 at its last hashing, with its stamp
//	  .install-*/  .remove-*/                  transient; never read as installs
//	~/.marina/plugins.lock                     the lock file (LockFile as JSON)
//
// manifest.json records the plugin's description as it was when installed
// (name, version, protocol, hooks, dependencies, config schema...), the
// source, the binary's sha256, the install time and whether the checksum
// check was skipped. List, Resolve and `marina plugin list` read manifests
// only: no plugin process is started to list the store. DescribeCached gives
// the same property to binaries outside the store (marina's own built-ins):
// their descriptions are cached by the binary's sha256.
//
// # Atomicity
//
// An install never writes into its final directory. Everything happens in a
// fresh temporary directory inside the root (same filesystem, so rename(2)
// is atomic): fetch or copy, hash, check the file format and platform, make
// executable, launch the binary once to read its description, check it, write
// manifest.json, then rename the platform directory into place. A reader
// sees either no install or a complete one; an interrupted install leaves
// only a .install-* directory, which later installs sweep up.
//
// An installed version is never modified in place: installing the same
// version again is a no-op if the binary has the same sha256 and is refused
// if it differs (remove it first). The one exception is repair: if the
// installed binary no longer matches its own manifest, installing the build
// with the recorded digest replaces the damaged copy. Two installs racing for
// the same version both stage privately; the loser of the rename sees the
// winner's manifest and takes the same-version path, so the store ends with
// one valid install and no temporary directories. Remove renames a version
// out of the tree before deleting it, so it is never seen half-deleted.
//
// The lock file is rewritten with core/atomicfile and serialised within the
// process; commands that change it from several processes hold marina's
// process lock (core/lock), as every state-changing command does.
//
// # Trust model
//
//   - What is trusted is a sha256 digest, established once: at install, from
//     the --sha256 the user supplies (required for https sources unless
//     InsecureSkipChecksum, which the manifest and lock file record so `list`
//     can show it), from the OCI registry's content addressing (the layer's
//     digest is checked against the bytes received), or from the local file
//     the user points at.
//   - Before the first exec the artifact is checked by content, not by name:
//     an HTML page or a JSON error body (a release page or a 404 saved as the
//     "binary"), a zip or a Windows executable get a clear error, and an
//     ELF/Mach-O binary built for another OS or CPU is refused with the
//     platform it was built for. Only then is the binary launched, once, to
//     describe itself; a plugin whose protocol this marina cannot speak is
//     refused there, at install, rather than at the first `marina up`.
//   - The binary's sha256 is recorded in its manifest and, when the config
//     selects a version, in the lock file (per platform). Verify re-hashes the
//     binary before every launch and refuses it if it differs from either:
//     a tampered or replaced binary is never started. `plugin verify` hashes
//     too; only `plugin list` (ListInstalls) takes the digest recorded at
//     the last hashing, while the file keeps the inode, size, mode, mtime and
//     ctime it had then and its ctime is older than that hashing (no write,
//     chmod or rename leaves ctime unchanged; setting it takes the system
//     clock), so a 30 MB plugin is not read on every listing.
//   - The store is as trusted as the user's home directory: anyone who can
//     rewrite ~/.marina can rewrite the manifests too; the lock file (which
//     may be kept under version control) is the second, independent record.
//     Hashing then exec leaves a time-of-check/time-of-use window; the
//     runtime can close it by passing Installed.SHA256 to go-plugin's
//     SecureConfig, which hashes again right before exec.
//
// The store never launches a plugin except through the Describer its caller
// provides (wired to core/plugin), so this package does not depend on the
// plugin runtime.
package pluginstore
