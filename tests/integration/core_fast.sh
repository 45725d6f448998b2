#!/bin/sh
# SPDX-License-Identifier: MIT
# usage: core_fast.sh UPROBE CORE_FAST
# The fast path (counting probes as a jmp to an in-process trampoline) on
# tests/targets/core_fast.c: every site goes on it (-v says so), the counts are exact
# with threads, across fork (default: the child is followed and counted through int3s;
# --no-follow: the child runs the original code), a fault in the relocated instruction
# reaches the program's handler at the probed address, the flags survive, and the
# program's output is byte for byte the unprobed one.  --no-fast gives the same counts.
set -u
uprobe=$1 prog=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; cat "$tmp/out" "$tmp/err" 2>/dev/null; exit 1; }
cat >"$tmp/specs" <<SPECS
p:f/nop5 $prog:fast_nop5
p:f/mov $prog:fast_mov
p:f/lea $prog:fast_lea
p:f/store $prog:fast_store
p:f/flags $prog:fast_flags+3
SPECS
count() { awk -v ev="$1" '$2 == ev { print $3 }' "$tmp/err"; } # -c with a command: stderr
run() { # EXTRA-OPTS MODE ARGS...: traced with -c, outputs in out/err, the program's in prog
	opts=$1; shift
	# shellcheck disable=SC2086
	"$uprobe" trace -c -v $opts -f "$tmp/specs" -- "$prog" "$@" >"$tmp/out" 2>"$tmp/err"
	st=$?
	cp "$tmp/out" "$tmp/prog"
	"$prog" "$@" >"$tmp/plain"
	pst=$?
	[ $st = $pst ] || fail "exit status $st, unprobed $pst"
	cmp -s "$tmp/prog" "$tmp/plain" || fail "the program's output changed"
}
# 1. counts, 4 threads; every site on the fast path
run "" count 50000 4
for ev in nop5 mov lea flags; do
	[ "$(count f/$ev)" = 200000 ] || fail "f/$ev counted $(count f/$ev), not 200000"
done
n=$(grep -c "on the fast path" "$tmp/err")
[ "$n" = 5 ] || fail "$n of 5 sites on the fast path"
grep -q "stays on the trap path" "$tmp/err" && fail "a site fell back"
# 2. the same through int3s
run --no-fast count 2000 2
for ev in nop5 mov lea flags; do
	[ "$(count f/$ev)" = 4000 ] || fail "--no-fast: f/$ev counted $(count f/$ev)"
done
grep -q "on the fast path" "$tmp/err" && fail "--no-fast used the fast path"
# 3. fork: followed (counted through int3s in the child) or not (original code there)
run "" fork 1000
[ "$(count f/mov)" = 3000 ] || fail "fork: f/mov counted $(count f/mov), not 3000"
run --no-follow fork 1000
[ "$(count f/mov)" = 2000 ] || fail "fork --no-follow: f/mov counted $(count f/mov), not 2000"
# 4. the relocated instruction faults: the program's handler sees it at home
run "" segv 20
grep -q "segv 20 of 20" "$tmp/prog" || fail "the program saw the faults elsewhere"
[ "$(count f/store)" = 20 ] || fail "f/store counted $(count f/store), not 20"
echo PASS
