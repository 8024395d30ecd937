#!/usr/bin/env bash
# Installs what building and testing Ballast needs on a Debian machine, once: Debian's RocksDB
# (linked instead of compiled, which saves ~25 minutes per cold build), clang for bindgen, protoc
# for the raft and etcd protos with libprotobuf-dev (the well-known types etcd-client's protos
# import, which an install without recommends leaves out), and the real etcd server and etcdctl
# the tests compare against, and the openssl command the TLS, auth and security tests make
# certificates and slow TLS clients with (util-linux's prlimit, which the file-descriptor test
# uses, is in every Debian install), and a Python virtual environment with the Kubernetes Python
# client (deploy/requirements-test.txt) at $BALLAST_TEST_VENV (default ~/.cache/ballast/venv),
# which the frontend's Python-client tests run.
# Safe to run again: it installs only what is missing.
set -euo pipefail

packages=(librocksdb-dev libclang-dev protobuf-compiler libprotobuf-dev etcd-server etcd-client pkg-config build-essential openssl ca-certificates)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  # The etcd-server package must not start a system etcd on the ports tests use.
  DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# A system etcd started by the package would hold 2379; tests use their own ports, but stop it anyway.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet etcd 2>/dev/null; then
  systemctl stop etcd || true
fi
command -v etcd >/dev/null && command -v etcdctl >/dev/null && command -v protoc >/dev/null
# kubectl is not a Debian package; machines of this kind carry it (/usr/bin/kubectl, 1.32). The
# frontend tests drive it, so say so plainly rather than fail deep inside a test.
if ! command -v kubectl >/dev/null; then
  echo "setup: kubectl not found on PATH; the frontend tests need kubectl 1.32 (/usr/bin/kubectl)" >&2
  exit 1
fi
# The Python client the frontend tests drive, in its own virtual environment (the system Python
# is left alone). Reinstalled only when the pinned requirements change.
venv=${BALLAST_TEST_VENV:-$HOME/.cache/ballast/venv}
requirements="$(dirname "$0")/requirements-test.txt"
if ! cmp -s "$requirements" "$venv/requirements-test.txt" 2>/dev/null; then
  echo "setup: installing the Python test clients into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$requirements"
  cp "$requirements" "$venv/requirements-test.txt"
fi
# cargo-fuzz runs the fuzz targets (.ci/fuzz); it is a crates.io tool, built once. It drives the
# machine's own (stable) toolchain, see .ci/fuzz; libFuzzer's C++ is built by build-essential.
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "setup: installing cargo-fuzz"
  cargo install cargo-fuzz --locked --version 0.13.2 --quiet
fi
