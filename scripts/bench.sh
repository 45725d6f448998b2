#!/bin/sh
# SPDX-License-Identifier: MIT
# usage: scripts/bench.sh BUILD — `make bench`: every benchmark, ratios measured side by side.
set -e
build=${1:-build}
echo "== per-hit cost of a probe, by plan, beside a bare ptrace stop (bench/bench_core.c) =="
"$build/bench/bench_core" "$build/bench/bench_target" "${BENCH_N:-20000}" "${BENCH_ROUNDS:-5}"
