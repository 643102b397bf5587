// Package hostnet owns what marina changes outside the containers: on the
// user's machine the route from the docker bridge CIDR to the VM and the DNS
// resolver entry for the local zone, and inside the VM (the "guest") the IP
// forwarding and iptables rules that keep bridge <-> host traffic un-NATed.
//
// # Privileged commands
//
// Every change on the user's machine needs root. All of it goes through
// [Privileged], which prints "marina needs administrator rights to <reason>:"
// and each command, shell-quoted for copy-paste, before sudo can ask for a
// password. Without a terminal marina never prompts: it asks `sudo -n -l -- <command>`
// whether sudo would run without a password and, if not, returns a
// [*NeedPrivilegeError] listing the exact commands the user can run. Commands
// are argv vectors, never shell strings; files are written with
// `tee <path>` fed on stdin.
//
// # Route
//
// [Route] keeps exactly one route, <bridge CIDR> -> the VM's lima0 address.
// On macOS it asks `/sbin/route -n get -net <cidr>` and counts the route as
// present only when the destination and mask printed equal the CIDR, so a
// default route (or a VPN's wider route) that merely covers the CIDR is not
// mistaken for it (klimax's gap G4). It deletes a route only when one for
// exactly that CIDR points elsewhere, and adds it only when missing. On Linux
// (the lima driver on a Linux host) it uses `ip -4 route show exact <cidr>`
// and `ip route replace`.
//
// # Resolver
//
// [Resolver] sends the local zone to marina's DNS server: on macOS a file
// /etc/resolver/<zone> holding marina's header and `nameserver` lines (left
// alone when unchanged, removed only when it carries marina's header); on
// Linux per-link DNS routing through systemd-resolved (`resolvectl dns` and
// `resolvectl domain ~<zone>` on the bridge link) when it runs, otherwise
// nothing is changed and the exact lines to add for common setups are
// returned. /etc/resolv.conf is never written.
//
// # Guest network
//
// [EnsureGuestNetwork] runs, as root in the VM through the driver's Exec
// (argv only), everything that lets the Mac reach containers by their own
// addresses: ip_forward, a nat POSTROUTING ACCEPT rule that exempts bridge ->
// host traffic from Docker's MASQUERADE (kept first in the chain, because
// Docker inserts its rules at the top again whenever it restarts), and a
// DOCKER-USER ACCEPT for host -> bridge traffic. It persists them with a
// script run by a systemd oneshot at boot and by a docker.service drop-in
// (ExecStartPost) after every Docker restart, installing each file only when
// its content differs. The script derives the guest network from the
// interface's own address and prefix (`ip -o -4 addr show`), never assuming a
// /24 (klimax's gap G17).
package hostnet
