#!/bin/sh
# Installs the Debian packages uprobe needs to build and test, when run as root;
# otherwise prints the one apt-get line that is needed and fails.
set -e

# python3 runs the differential tests (tests/integration/*.py); binutils is their oracle.
# libfuse3-dev and fuse3 (fusermount3): `uprobe mount`, the control filesystem (src/fs/).
# valgrind: the tracer is checked under memcheck (tests/reliability.cmake).
# libc6-dev: its libc.a links a static test target (tests/core.cmake).
# systemtap-sdt-dev: <sys/sdt.h> for the USDT test target; python3.11: Debian's
# /usr/bin/python3.11 and its SDT probes, a real USDT target (tests/probes.cmake).
# linux-source-6.12: the kernel's ftracetest harness and uprobe selftests, run against
# `uprobe mount` (tests/ftrace/); its tarball is read, never built.
# libmicrohttpd-dev: `uprobe trace --listen` serves its metrics over HTTP with it;
# prometheus (prometheus, promtool): the metrics' oracle (tests/integration/metrics.py).
# bpftrace: `uprobe run` is compared with it, and runs its tools (/usr/sbin/*.bt) unchanged
# (tests/run.cmake).
PKGS="cmake make gcc libc6-dev pkg-config libzydis-dev libelf-dev libdw-dev libcmocka-dev gcc-multilib binutils python3 libfuse3-dev fuse3 valgrind systemtap-sdt-dev python3.11 linux-source-6.12 gdb libmicrohttpd-dev prometheus bpftrace"

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done

[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "uprobe: missing build dependencies. Install them with:" >&2
	echo "  sudo apt-get install -y$missing" >&2
	exit 1
fi

echo "uprobe: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq || true
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
