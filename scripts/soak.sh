#!/bin/sh
# SPDX-License-Identifier: MIT
# soak.sh [SECONDS] [-- DRIVER OPTIONS]: random register/unregister at random instruction
# addresses of a busy multithreaded program (tests/targets/rel_soak_busy) for SECONDS
# (default 600), each run compared with an unprobed reference run (issue 8, part 7).
# Not part of `make test` (nor of ctest: a run cannot be cut short, so even a short soak
# can take minutes).
# Environment: BUILD (default: build next to this script), SOAK_THREADS, SOAK_ITERS,
# SOAK_SEED, SOAK_MODE (0 mixed, 1 int3 probes only, 2 counting probes only, 3 counting
# probes on int3 stops only).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$here/build}
secs=${1:-600}
[ $# -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
driver=$build/tests/targets/rel_soak_driver
busy=$build/tests/targets/rel_soak_busy
cli=$build/uprobe
for f in "$driver" "$busy" "$cli"; do
	[ -x "$f" ] || { echo "soak.sh: $f missing: build first (make)" >&2; exit 2; }
done
set -- -t "$secs" -m "${SOAK_MODE:-0}" ${SOAK_SEED:+-s "$SOAK_SEED"} "$@"
exec "$driver" "$@" -u "$cli" -- "$busy" "${SOAK_THREADS:-6}" "${SOAK_ITERS:-500}"
