#!/usr/bin/env bash
# test/vm/image.sh: the VM test's disk image, built offline from Debian's
# package mirror (the only network it uses).
#
# Debian 12 (bookworm), amd64: mmdebstrap with the cloud kernel, cloud-init
# (Lima's cidata), openssh-server, docker.io, sudo and what Lima's boot
# scripts and marina's provisioning check for (iptables, rsync, curl,
# ca-certificates), so the VM needs no download at boot. The disk is GPT with
# a systemd-boot EFI system partition and an ext4 root made with
# `mkfs.ext4 -d` (no mounts, no loop devices), converted to qcow2.
#
# Cached under ${MARINA_TEST_CACHE:-$HOME/.cache/marina-test}/vm, keyed by a
# hash of this script (its package list, suite and layout) and the mirror;
# FORCE=1 rebuilds. Runs as root (mmdebstrap's root mode, apt-get for the
# host packages it needs). Prints the image path on its last line, and
# writes it with its sha256 to $cache/vm/image.env.
set -euo pipefail

if [ "$(id -u)" != 0 ]; then
  echo "test/vm/image.sh: run as root (mmdebstrap, apt-get)" >&2
  exit 1
fi

SUITE=bookworm
MIRROR="${MARINA_TEST_VM_MIRROR:-http://deb.debian.org/debian}"
PACKAGES=(
  systemd systemd-sysv udev dbus kmod procps iproute2 ifupdown isc-dhcp-client netbase
  linux-image-cloud-amd64 initramfs-tools
  cloud-init cloud-guest-utils fdisk e2fsprogs
  openssh-server sudo
  docker.io apparmor iptables ca-certificates curl rsync
)
ROOT_SIZE_MIB=3072
ESP_SIZE_MIB=256

cache="${MARINA_TEST_CACHE:-$HOME/.cache/marina-test}/vm"
key="$( { cat "$0"; echo "$MIRROR"; } | sha256sum | cut -c1-16)"
name="debian-$SUITE-amd64-$key"
image="$cache/$name.qcow2"

say() { echo "image.sh: $*" >&2; }
t0=$SECONDS

write_env() {
  local sum
  sum="$(cut -d' ' -f1 <"$image.sha256")"
  printf 'MARINA_TEST_VM_IMAGE=%s\nMARINA_TEST_VM_IMAGE_SHA256=%s\n' "$image" "$sum" >"$cache/image.env"
  echo "$image"
}

if [ -z "${FORCE:-}" ] && [ -s "$image" ] && [ -s "$image.sha256" ]; then
  say "up to date: $image ($(( SECONDS - t0 ))s)"
  write_env
  exit 0
fi

# Host packages (Debian), installed when missing.
host_pkgs=(mmdebstrap qemu-utils mtools dosfstools fdisk e2fsprogs systemd-boot-efi)
missing=()
for p in "${host_pkgs[@]}"; do
  if [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" != "install ok installed" ]; then
    missing+=("$p")
  fi
done
if [ "${#missing[@]}" -gt 0 ]; then
  say "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi
boot_efi=/usr/lib/systemd/boot/efi/systemd-bootx64.efi
[ -f "$boot_efi" ] || { say "missing $boot_efi (systemd-boot-efi)"; exit 1; }

mkdir -p "$cache"
work="$(mktemp -d "$cache/.build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
rootfs="$work/rootfs"

# The root file system's UUID is fixed by the inputs, so the boot entry and
# fstab can name it before the file system exists.
uuid="$(printf '%s' "$key" | sha256sum | sed -E 's/^(.{8})(.{4}).(.{3}).(.{3})(.{12}).*/\1-\2-4\3-8\4-\5/')"

say "mmdebstrap $SUITE from $MIRROR (${#PACKAGES[@]} packages)"
t=$SECONDS
mmdebstrap --mode=root --variant=minbase --components=main \
  --include="$(IFS=,; echo "${PACKAGES[*]}")" \
  --aptopt='Acquire::Retries "3"' \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --customize-hook="echo 'UUID=$uuid / ext4 defaults,errors=remount-ro 0 1' >\"\$1/etc/fstab\"" \
  --customize-hook='echo marina-test >"$1/etc/hostname"' \
  --customize-hook='printf "auto lo\niface lo inet loopback\nsource-directory /etc/network/interfaces.d\n" >"$1/etc/network/interfaces"' \
  --customize-hook='printf "datasource_list: [ NoCloud, None ]\nmanage_etc_hosts: true\n" >"$1/etc/cloud/cloud.cfg.d/90-marina-test.cfg"' \
  --customize-hook='rm -f "$1/etc/machine-id" && touch "$1/etc/machine-id"' \
  --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
  "$SUITE" "$rootfs" "$MIRROR" >"$work/mmdebstrap.log" 2>&1 || {
    tail -n 40 "$work/mmdebstrap.log" >&2
    say "mmdebstrap failed"
    exit 1
  }
say "rootfs: $(du -sh "$rootfs" | cut -f1) in $(( SECONDS - t ))s"

kernel="$(ls "$rootfs"/boot/vmlinuz-* | sort -V | tail -n1)"
initrd="$(ls "$rootfs"/boot/initrd.img-* | sort -V | tail -n1)"

t=$SECONDS
# The ESP: systemd-boot as the removable-media loader (no NVRAM entry
# needed), the kernel and initrd, one entry with the serial console (Lima
# logs it to serial.log).
esp="$work/esp.img"
mkfs.fat -F 32 -n ESP -C "$esp" $(( ESP_SIZE_MIB * 1024 )) >/dev/null
mmd -i "$esp" ::/EFI ::/EFI/BOOT ::/loader ::/loader/entries
mcopy -i "$esp" "$boot_efi" ::/EFI/BOOT/BOOTX64.EFI
mcopy -i "$esp" "$kernel" ::/vmlinuz
mcopy -i "$esp" "$initrd" ::/initrd.img
printf 'default debian.conf\ntimeout 0\n' >"$work/loader.conf"
printf 'title Debian %s (marina test)\nlinux /vmlinuz\ninitrd /initrd.img\noptions root=UUID=%s ro console=tty0 console=ttyS0,115200 net.ifnames=0\n' \
  "$SUITE" "$uuid" >"$work/debian.conf"
mcopy -i "$esp" "$work/loader.conf" ::/loader/loader.conf
mcopy -i "$esp" "$work/debian.conf" ::/loader/entries/debian.conf

# The root file system, filled from the directory (no mount).
root="$work/root.img"
mkfs.ext4 -q -F -L root -U "$uuid" -d "$rootfs" "$root" "${ROOT_SIZE_MIB}M"
rm -rf "$rootfs"

# GPT: ESP at 1 MiB, root after it (last, so cloud-init's growpart can grow
# it to the VM's disk size), 1 MiB left for the backup table.
raw="$work/disk.raw"
total_mib=$(( 1 + ESP_SIZE_MIB + ROOT_SIZE_MIB + 1 ))
truncate -s "${total_mib}M" "$raw"
sfdisk -q "$raw" <<EOF
label: gpt
start=2048, size=$(( ESP_SIZE_MIB * 2048 )), type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name=esp
start=$(( (1 + ESP_SIZE_MIB) * 2048 )), size=$(( ROOT_SIZE_MIB * 2048 )), type=4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709, name=root
EOF
dd if="$esp" of="$raw" bs=1M seek=1 conv=notrunc,sparse status=none
dd if="$root" of="$raw" bs=1M seek=$(( 1 + ESP_SIZE_MIB )) conv=notrunc,sparse status=none
rm -f "$esp" "$root"
say "disk: ESP ${ESP_SIZE_MIB} MiB + root ${ROOT_SIZE_MIB} MiB in $(( SECONDS - t ))s"

t=$SECONDS
qemu-img convert -q -c -O qcow2 "$raw" "$work/$name.qcow2"
sha256sum <"$work/$name.qcow2" | cut -d' ' -f1 >"$work/$name.qcow2.sha256"
mv -f "$work/$name.qcow2.sha256" "$image.sha256.new"
mv -f "$work/$name.qcow2" "$image"
mv -f "$image.sha256.new" "$image.sha256"
say "qcow2: $(du -h "$image" | cut -f1) in $(( SECONDS - t ))s; total $(( SECONDS - t0 ))s"
# Older images of this script are of no use any more.
find "$cache" -maxdepth 1 -name 'debian-*.qcow2*' ! -name "$name.qcow2*" -delete
write_env
