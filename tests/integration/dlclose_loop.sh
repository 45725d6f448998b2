#!/bin/sh
# SPDX-License-Identifier: MIT
# usage: dlclose_loop.sh UPROBE TRACE_DLOPEN TRACE_LIB
# A probed library dlopen'd and dlclose'd many times while its probes are live (entry,
# a later instruction, a return probe, a fetching probe): the target's output and status
# as unprobed, every hit counted, no hang; the tracer's peak memory (RSS) the same for
# 100 and 2,000 rounds, and the target's executable mappings (our slot areas among them)
# as few after 2,000 rounds as after 100.
# The peak RSS of one run varies by up to ~400 KB from run to run with no leak at all
# (3,000 rounds have measured below 100), so each count runs twice and the smaller
# peak is compared: a leak of 300 bytes a round still shows as 570 KB.
set -u
uprobe=$1
prog=$2
lib=$3
[ -x /usr/bin/time ] || { echo "SKIP: no /usr/bin/time"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
K=5
for rounds in 100 2000 100 2000; do
	"$prog" "$lib" $K $rounds > "$tmp/plain" 2>&1
	pst=$?
	TRACE_DLOPEN_MAPS=1 timeout 120 /usr/bin/time -o "$tmp/time.$rounds" -f "%M" \
		"$uprobe" trace -c -e "p:t/entry $lib:lib_func" -e "p:t/later $lib:lib_func+4" \
		-e "r:t/ret $lib:lib_func" -e "p:t/arg $lib:lib_func %di" \
		-- "$prog" "$lib" $K $rounds > "$tmp/out" 2> "$tmp/err"
	st=$?
	[ $st = 124 ] && fail "$rounds rounds: uprobe did not finish in 120 s"
	[ $st = $pst ] || fail "$rounds rounds: exit status $st, unprobed $pst"
	cmp -s "$tmp/out" "$tmp/plain" || fail "$rounds rounds: the output differs"
	for e in entry later ret arg; do
		grep -qE " t/$e +$((K * rounds))\$" "$tmp/err" ||
			fail "$rounds rounds: t/$e did not count $((K * rounds)): $(grep " t/$e " "$tmp/err")"
	done
	rss=$(tail -1 "$tmp/time.$rounds")
	eval "prev=\${rss_$rounds:-$rss}"
	[ "$rss" -lt "$prev" ] || rss=$prev
	eval "rss_$rounds=$rss"
	eval "nx_$rounds=$(sed -n 's/^executable mappings: //p' "$tmp/err")"
	cat "$tmp/err"
done
echo "tracer peak RSS (the smaller of two runs): $rss_100 KB after 100 rounds, $rss_2000 KB after 2000"
echo "target's executable mappings at the end: $nx_100 after 100 rounds, $nx_2000 after 2000"
# RSS_SLACK_KB: more under a sanitizer, whose allocator and shadow vary by ~600 KB
[ $((rss_2000 - rss_100)) -lt "${RSS_SLACK_KB:-512}" ] || fail "the tracer's memory grows with the rounds"
[ "$nx_2000" -le "$nx_100" ] || fail "the target's executable mappings grow with the rounds"
echo PASS
