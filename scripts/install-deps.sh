#!/usr/bin/env bash
# Installs every Debian package that building, running and testing vtrn needs.
# Idempotent: it asks apt only for what is missing, so a second run is a no-op.
# The firmware links Debian's arm64 libfdt.a and libprotobuf-c.a, hence the
# foreign architecture.
set -euo pipefail

host_pkgs=(
  build-essential cmake ninja-build pkg-config git
  qemu-system-arm device-tree-compiler
  gcc-aarch64-linux-gnu g++-aarch64-linux-gnu picolibc-aarch64-linux-gnu
  libfdt-dev libcmocka-dev protobuf-c-compiler libprotobuf-c-dev libcli11-dev
  nlohmann-json3-dev gdb-multiarch clang libclang-rt-14-dev python3
  libopenblas-dev
  protobuf-compiler python3-protobuf python3-numpy python3-pytest
  prometheus python3-prometheus-client graphviz
)
# libfdt-dev is not Multi-Arch: same, so its arm64 build cannot sit beside the
# native one. The firmware needs only the static archives and headers, so the
# arm64 packages are unpacked into a private sysroot instead of installed.
target_pkgs=(libfdt-dev libprotobuf-c-dev)
sysroot=${VTRN_SYSROOT:-/opt/vtrn/sysroot-arm64}

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi

missing=()
for p in "${host_pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

need_sysroot=0
for lib in libfdt.a libprotobuf-c.a; do
  [ -f "$sysroot/usr/lib/aarch64-linux-gnu/$lib" ] || need_sysroot=1
done

if [ ${#missing[@]} -eq 0 ] && [ $need_sysroot -eq 0 ]; then
  echo "install-deps: all packages present (arm64 sysroot: $sysroot)"
  exit 0
fi

export DEBIAN_FRONTEND=noninteractive
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  "${sudo_cmd[@]}" dpkg --add-architecture arm64
fi
"${sudo_cmd[@]}" apt-get update -q
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if [ $need_sysroot -eq 1 ]; then
  echo "install-deps: unpacking arm64 ${target_pkgs[*]} into $sysroot"
  tmp=$(mktemp -d)
  chmod 755 "$tmp"  # apt downloads as the _apt user
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && apt-get download -q "${target_pkgs[@]/%/:arm64}")
  "${sudo_cmd[@]}" mkdir -p "$sysroot"
  for deb in "$tmp"/*.deb; do
    "${sudo_cmd[@]}" dpkg-deb -x "$deb" "$sysroot"
  done
fi
