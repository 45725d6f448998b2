#!/bin/sh
# SPDX-License-Identifier: MIT
# usage: probes_glob.sh UPROBE
# Wildcard specs: p PATH:str* on libc makes one event per function (named after it,
# aliases once, IFUNC resolvers left out, -v saying how many matched); tracing ls
# through the ptrace backend and the kernel's uprobe tracer counts every event alike.
# A whole library (libc:*, thousands of probes) is armed in seconds; a glob that
# matches nothing, and an event name with a glob, are refused with a caret.
set -u
uprobe=$1
libc=/lib/x86_64-linux-gnu/libc.so.6
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
[ -f $libc ] || { echo "SKIP: no $libc"; exit 77; }

"$uprobe" trace -v -c -e "p:uptest_kb/* $libc:str*" -- ls -l / >/dev/null 2>"$tmp/p.err" ||
	{ cat "$tmp/p.err"; fail "ptrace backend exited $?"; }
grep 'functions matched' "$tmp/p.err"
n=$(grep -c ' uptest_kb/' "$tmp/p.err")
grep -qE "str\*': $n probes \([0-9]+ functions matched; left out: [0-9]+ aliases, [0-9]+ IFUNC resolvers\)" "$tmp/p.err" ||
	fail "-v does not say how many matched"
[ "$n" -ge 20 ] || fail "only $n str* events"
for f in strdup strcoll strtol; do
	grep -q " uptest_kb/$f " "$tmp/p.err" || fail "no event named $f"
done
# strlen is an IFUNC: its resolver (and glibc's local alias strlen_ifunc) is not probed
grep -qE " uptest_kb/strlen(_ifunc)? " "$tmp/p.err" && fail "an IFUNC resolver was probed"
if [ "$(id -u)" = 0 ] && { [ -d /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null; } &&
	[ -w /sys/kernel/tracing/uprobe_events ]; then
	"$uprobe" trace -b kernel -c -e "p:uptest_kb/* $libc:str*" -- ls -l / >/dev/null 2>"$tmp/k.err" ||
		{ cat "$tmp/k.err"; fail "kernel backend exited $?"; }
	grep ' uptest_kb/' "$tmp/p.err" | awk '{ print $2, $3 }' | sort >"$tmp/p.c"
	grep ' uptest_kb/' "$tmp/k.err" | awk '{ print $2, $3 }' | sort >"$tmp/k.c"
	echo "events with hits (ptrace | kernel):"
	join "$tmp/p.c" "$tmp/k.c" | awk '$2 > 0 || $3 > 0'
	hits=$(awk '{ s += $2 } END { print s }' "$tmp/p.c")
	echo "$n events, $hits hits in all"
	[ "$hits" -gt 0 ] || fail "no hit"
	diff -u "$tmp/k.c" "$tmp/p.c" || fail "the backends count differently (- kernel, + ptrace)"
else
	echo "note: no writable tracefs: the kernel backend is not compared"
fi

start=$(date +%s%N)
"$uprobe" trace -v -c -e "p $libc:*" -- true >/dev/null 2>"$tmp/all.err" ||
	{ tail -3 "$tmp/all.err"; fail "libc:* exited $?"; }
ms=$(( ($(date +%s%N) - start) / 1000000 ))
grep 'functions matched' "$tmp/all.err"
echo "libc:*: $(grep -c ' uprobes/' "$tmp/all.err") probes armed and removed in $ms ms"
[ "$(grep -c ' uprobes/' "$tmp/all.err")" -ge 1000 ] || fail "libc:* made too few probes"
[ "$ms" -lt 30000 ] || fail "libc:* took $ms ms"

"$uprobe" trace -e "p $libc:zzno*" -- true 2>"$tmp/e1" && fail "a glob matching nothing accepted"
cat "$tmp/e1"
grep -q "no function matches 'zzno\*'" "$tmp/e1" && grep -q '\^~~~~$' "$tmp/e1" || fail "no caret"
"$uprobe" trace -e "p:g/ev $libc:str*" -- true 2>"$tmp/e2" && fail "an event name with a glob accepted"
grep -q 'one event per function' "$tmp/e2" || { cat "$tmp/e2"; fail "no clear error"; }
echo PASS
