#!/bin/bash
# managed by marina: `marina up` rewrites this file.
#
# Keeps traffic between the docker bridge and the host un-NATed, so the
# host reaches containers by their own addresses and containers reach the
# host with theirs (marina's pure L3 routing). Run as root by
# marina-guest-net.service at boot and by docker.service (ExecStartPost)
# after every Docker start, because Docker re-inserts its MASQUERADE rule at
# the top of nat POSTROUTING whenever it starts.
#
# usage: marina-guest-net.sh BRIDGE_CIDR GUEST_IFACE
#   e.g. marina-guest-net.sh 172.30.0.0/16 lima0
set -euo pipefail

if [ "$#" -ne 2 ]; then
	echo "usage: $0 BRIDGE_CIDR GUEST_IFACE" >&2
	exit 64
fi
bridge_cidr=$1
guest_iface=$2

log() { echo "marina-guest-net: $*" >&2; }
ipt() { iptables -w 5 "$@"; }

# guest_net prints the IPv4 network of $guest_iface as a.b.c.d/len, from the
# interface's own address and prefix length (never assumed to be a /24).
guest_net() {
	local line addr a b c d len n mask
	line=$(ip -o -4 addr show dev "$guest_iface" 2>/dev/null) || return 1
	# 3: lima0    inet 192.168.64.3/24 brd 192.168.64.255 scope global dynamic lima0 ...
	read -r _ _ _ addr _ <<<"$line" || return 1
	[[ $addr =~ ^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})/([0-9]{1,2})$ ]] || return 1
	a=$((10#${BASH_REMATCH[1]}))
	b=$((10#${BASH_REMATCH[2]}))
	c=$((10#${BASH_REMATCH[3]}))
	d=$((10#${BASH_REMATCH[4]}))
	len=$((10#${BASH_REMATCH[5]}))
	((len <= 32)) || return 1
	n=$(((a << 24) | (b << 16) | (c << 8) | d))
	mask=$((len == 0 ? 0 : (0xFFFFFFFF << (32 - len)) & 0xFFFFFFFF))
	n=$((n & mask))
	echo "$((n >> 24 & 255)).$((n >> 16 & 255)).$((n >> 8 & 255)).$((n & 255))/$len"
}

# first_rule TABLE CHAIN prints the chain's first rule as `iptables -S`
# prints it (the line after -P/-N).
first_rule() {
	local lines
	mapfile -t lines < <(ipt -t "$1" -S "$2")
	echo "${lines[1]:-}"
}

# ensure_first TABLE CHAIN TAG RULE...: RULE exists and is the first rule of
# CHAIN. Checked with -C before anything is inserted.
ensure_first() {
	local table=$1 chain=$2 tag=$3 i
	shift 3
	if ipt -t "$table" -C "$chain" "$@" 2>/dev/null; then
		if [[ $(first_rule "$table" "$chain") == *"--comment $tag "* ]]; then
			return 0
		fi
		for ((i = 0; i < 10; i++)); do
			ipt -t "$table" -D "$chain" "$@" 2>/dev/null || break
		done
		log "moving the $tag rule back to the top of $table $chain"
	fi
	ipt -t "$table" -I "$chain" 1 "$@"
}

# ensure_present TABLE CHAIN RULE...: RULE exists in CHAIN (inserted first
# when missing).
ensure_present() {
	local table=$1 chain=$2
	shift 2
	ipt -t "$table" -C "$chain" "$@" 2>/dev/null || ipt -t "$table" -I "$chain" 1 "$@"
}

if ! net=$(guest_net); then
	log "no IPv4 address on $guest_iface yet; nothing to do"
	exit 0
fi

sysctl -q -w net.ipv4.ip_forward=1

# Bridge -> host: exempt from Docker's MASQUERADE, so the host sees the
# container's own address.
ensure_first nat POSTROUTING marina-no-snat \
	-s "$bridge_cidr" -d "$net" -o "$guest_iface" -m comment --comment marina-no-snat -j ACCEPT

# Host -> bridge: accepted before Docker's own FORWARD rules, which drop
# traffic to unpublished container ports from outside the bridge.
if ipt -t filter -S DOCKER-USER >/dev/null 2>&1; then
	ensure_present filter DOCKER-USER \
		-s "$net" -d "$bridge_cidr" -i "$guest_iface" -m comment --comment marina-host-to-bridge -j ACCEPT
else
	log "chain DOCKER-USER does not exist (is Docker running with iptables enabled?); host -> bridge rule skipped"
fi
