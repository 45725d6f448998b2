#!/bin/sh
# SPDX-License-Identifier: MIT
# usage: count_hits.sh COUNT_HITS UPROBE SAMPLE
# Seed 007's example on the seed 008 sample: attach to a running sample, probe foo(),
# feed it 5 characters, and check the 5 "Hit #N" lines, the total, and that the sample's
# own output and exit status are what they are without the probe.  Then the same
# with verbose 0 and a Ctrl-C (SIGINT) before the sample ends: the sample must go on
# unharmed after count_hits has gone.
set -u
count_hits=$1 uprobe=$2 sample=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; kill $spid 2>/dev/null' EXIT
fail() { echo "FAIL: $*"; for f in "$tmp"/*.txt; do echo "--- $f"; cat "$f"; done; exit 1; }
# the shell's child opens the fifo, then execs the sample: probe the sample, not the shell
wait_exec() {
	for i in $(seq 200); do
		[ "$(readlink /proc/$1/exe 2>/dev/null)" = "$(readlink -f "$sample")" ] && return
		sleep 0.01
	done
	fail "pid $1 never became $sample"
}

foo=$("$uprobe" list "$sample" foo | awk '{print $1}')
[ -n "$foo" ] || fail "no address for foo"

# 1. five hits, then the sample exits
mkfifo "$tmp/in"
"$sample" <"$tmp/in" >"$tmp/sample.txt" 2>&1 &
spid=$!
exec 3>"$tmp/in"
wait_exec $spid
"$count_hits" $spid "$foo" >"$tmp/hits.txt" 2>"$tmp/err.txt" 3>&- &
cpid=$!
# wait until the probe is in (count_hits says so on stderr)
for i in $(seq 200); do
	grep -q "count_hits: probing" "$tmp/err.txt" 2>/dev/null && break
	sleep 0.05
done
printf 'abcde' >&3  # foo() runs once per character
exec 3>&-
wait $spid; sstatus=$?
wait $cpid; cstatus=$?
[ $sstatus = 0 ] || fail "sample exited $sstatus"
[ $cstatus = 0 ] || fail "count_hits exited $cstatus"
for n in 1 2 3 4 5; do
	grep -qx "Hit #$n on probepoint at $foo" "$tmp/hits.txt" || fail "no 'Hit #$n' line"
done
grep -qx "Probepoint was hit 5 times" "$tmp/hits.txt" || fail "wrong total"
[ -s "$tmp/sample.txt" ] && fail "the sample printed something"

# 2. verbose 0, Ctrl-C while the sample still runs
rm -f "$tmp/in"; mkfifo "$tmp/in"
"$sample" <"$tmp/in" >"$tmp/sample2.txt" 2>&1 &
spid=$!
exec 3>"$tmp/in"
wait_exec $spid
"$count_hits" $spid "$foo" 0 >"$tmp/hits2.txt" 2>"$tmp/err2.txt" 3>&- &
cpid=$!
for i in $(seq 200); do
	grep -q "count_hits: probing" "$tmp/err2.txt" 2>/dev/null && break
	sleep 0.05
done
rchar() { awk '/^rchar/{print $2}' /proc/$spid/io; }
before=$(rchar)
printf 'ab' >&3
# until the sample has read both characters and sleeps in its next read
for i in $(seq 200); do
	now=$(rchar)
	state=$(awk '/^State/{print $2}' /proc/$spid/status)
	[ "$now" -ge $((before + 2)) ] && [ "$state" = S ] && break
	sleep 0.05
done
sleep 0.1
kill -INT $cpid
wait $cpid; cstatus=$?
[ $cstatus = 0 ] || fail "count_hits exited $cstatus after SIGINT"
grep -qx "Probepoint was hit 2 times" "$tmp/hits2.txt" || fail "wrong total after SIGINT"
grep -q "Hit #" "$tmp/hits2.txt" && fail "verbose 0 printed hits"
grep -q "TracerPid:[[:space:]]*0" /proc/$spid/status || fail "still traced after count_hits left"
printf 'cd' >&3
exec 3>&-
wait $spid; sstatus=$?
[ $sstatus = 0 ] || fail "sample exited $sstatus after count_hits left"
echo PASS
