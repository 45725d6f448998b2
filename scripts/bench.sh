#!/bin/sh
# SPDX-License-Identifier: MIT
# usage: scripts/bench.sh BUILD — `make bench`: per-hit cost of a probe for each workload
# and tool, measured side by side (bench/bench_core.c), and the cost of registration.
# Env: BENCH_ROUNDS (default 5), BENCH_RUN_SECONDS (default 0.2 s per run), BENCH_GDB_N
# (default 200 hits per gdb run), BENCH_REG_ROUNDS (default min(BENCH_ROUNDS, 3)),
# BENCH_NO_INSTALL=1 (do not apt-get install bpftrace, an optional peer not needed by
# make test), BENCH_TOOLS=KEY,... (only those tools, e.g. uprobe_fast,uprobe_fast_rec;
# the keys are those of results.json; no registration part), BENCH_FILE_N (default
# 200000: the calls of the kernel's and bpftrace's to-a-file rows).
# Results: stdout, BUILD/bench/results.json and BUILD/bench/results.svg.
set -e
build=${1:-build}
if [ ! -x "$build/bench/bench_core" ] || [ ! -x "$build/bench/bench_target" ]; then
	echo "bench: $build/bench/bench_core is missing: run make first" >&2
	exit 1
fi
command -v gdb >/dev/null 2>&1 || echo "bench: gdb not installed: its rows are skipped"
if ! command -v bpftrace >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && [ -z "$BENCH_NO_INSTALL" ] &&
	command -v apt-get >/dev/null 2>&1; then
	echo "bench: installing bpftrace (a peer; BENCH_NO_INSTALL=1 skips this)"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -q bpftrace >/dev/null 2>&1 ||
		{ apt-get update -q >/dev/null 2>&1 && apt-get install -y -q bpftrace >/dev/null 2>&1; } ||
		echo "bench: apt-get install bpftrace failed"
fi
command -v bpftrace >/dev/null 2>&1 || echo "bench: bpftrace not installed: its rows are skipped"
[ "$(id -u)" = 0 ] || echo "bench: not root: the kernel's uprobe tracer rows are skipped"
exec "$build/bench/bench_core" "$build"
