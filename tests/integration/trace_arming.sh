#!/bin/sh
# SPDX-License-Identifier: MIT
# trace.arming: one arming policy, launched or attached (issue 29 item 4).  A probe that
# cannot be armed (a vaddr nothing maps) beside one that can (libc's malloc):
#   -- COMMAND   the command runs, its status is uprobe's, stderr says "1 of 2 probes armed"
#                and lists the failure with its reason
#   -p PID       the same on a running process; tracing goes on until SIGINT (status 0)
#   --strict     status 2, "nothing traced", the command never runs
#   none armable status 2, "no probe could be armed; nothing traced"; a -p target runs
#                on untraced
#   r 0xVADDR    a return probe by address off a function's entry (malloc+4 in the running
#                process) is refused from the mapped file's symbols
# usage: trace_arming.sh UPROBE
set -u
U=$1
LIBC=/lib/x86_64-linux-gnu/libc.so.6
[ -f "$LIBC" ] || { echo "SKIP: no $LIBC"; exit 77; }
OK="p:t/ok $LIBC:malloc"
BAD="p:t/bad 0x10000"
W=$(mktemp -d /tmp/uprobe-arming.XXXXXX)
T=
cleanup() { [ -n "$T" ] && kill "$T" 2>/dev/null; rm -rf "$W"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; sed 's/^/  | /' "$W/err" 2>/dev/null; exit 1; }

# launched, one of two
"$U" trace -c -e "$OK" -e "$BAD" -- sh -c 'echo RAN; exit 3' > "$W/out" 2> "$W/err"
st=$?
[ $st -eq 3 ] || fail "launched: status $st, not the command's 3"
grep -qx RAN "$W/out" || fail "launched: the command did not run"
grep -Eq "[01] of 2 probes armed(, 1 waiting for their file)?; 1 could not be" "$W/err" || fail "launched: no summary line"
grep -q "'$BAD': cannot probe 0x10000" "$W/err" || fail "launched: the failure is not listed"
echo "ok: launched: $(grep 'probes armed' "$W/err")"

# --strict
"$U" trace --strict -c -e "$OK" -e "$BAD" -- sh -c 'echo RAN' > "$W/out" 2> "$W/err"
st=$?
[ $st -eq 2 ] || fail "--strict: status $st, not 2"
grep -qx RAN "$W/out" && fail "--strict: the command ran"
grep -q "strict: not every probe could be armed; nothing traced" "$W/err" || fail "--strict: no reason"
echo "ok: --strict refused: $(tail -1 "$W/err")"

# none can be armed
"$U" trace -c -e "$BAD" -- sh -c 'echo RAN' > "$W/out" 2> "$W/err"
st=$?
[ $st -eq 2 ] || fail "none: status $st, not 2"
grep -qx RAN "$W/out" && fail "none: the command ran"
grep -q "no probe could be armed; nothing traced" "$W/err" || fail "none: no reason"
echo "ok: none armable: $(tail -1 "$W/err")"

# attached: a running process
bash -c 'while :; do x=$((x + 1)); y="a$x"; done' &
T=$!
sleep 0.2
"$U" trace -c -e "$OK" -e "$BAD" -p $T > "$W/out" 2> "$W/err" &
TR=$!
i=0
while ! grep -q 'probes armed' "$W/err" 2>/dev/null; do
	i=$((i + 1))
	[ $i -ge 300 ] && fail "-p: no summary within 30 s"
	kill -0 $TR 2>/dev/null || fail "-p: the tracer ended: $(cat "$W/err")"
	sleep 0.1
done
sleep 0.3
kill -INT $TR
wait $TR
st=$?
[ $st -eq 0 ] || fail "-p: status $st after SIGINT, not 0"
grep -q "1 of 2 probes armed; 1 could not be" "$W/err" || fail "-p: no summary line"
grep -Eq "t/ok +[1-9]" "$W/out" || fail "-p: malloc was not counted: $(cat "$W/out")"
kill -0 $T || fail "-p: the target died"
echo "ok: attached: $(grep 'probes armed' "$W/err"), malloc counted: $(grep t/ok "$W/out" | tr -s ' ')"

# attached, none armable: nothing left
"$U" trace -c -e "$BAD" -p $T > "$W/out" 2> "$W/err"
st=$?
[ $st -eq 2 ] || fail "-p none: status $st, not 2"
grep -q "no probe could be armed; nothing traced" "$W/err" || fail "-p none: no reason"
kill -0 $T || fail "-p none: the target died"
grep -q "^TracerPid:[[:space:]]*0$" /proc/$T/status || fail "-p none: still traced"
echo "ok: attached, none armable: $(tail -1 "$W/err")"

# a return probe by address, 4 bytes into malloc in the running process: refused at
# arming from the mapped file's symbols, the target untouched (it killed ls before)
line=$(awk -v l="$LIBC" '$6 == l && $2 ~ /x/ { print $1, $3; exit }' /proc/$T/maps)
[ -n "$line" ] || line=$(awk '$6 ~ /libc\.so\.6$/ && $2 ~ /x/ { print $1, $3; exit }' /proc/$T/maps)
start=0x${line%%-*}
moff=0x${line##* }
mal=$("$U" list "$LIBC" malloc | awk '$4 == "malloc" { print $1; exit }')
v=$(printf '0x%x' $((start - moff + mal + 4)))
"$U" trace -c -e "r:t/off $v" -p $T > "$W/out" 2> "$W/err"
st=$?
[ $st -eq 2 ] || fail "r at $v: status $st, not 2"
grep -q "a return probe must be at a function's entry, and 0x[0-9a-f]* (.*malloc+0x4)" "$W/err" ||
	fail "r at $v: not refused as off an entry"
kill -0 $T || fail "r at $v: the target died"
echo "ok: a return probe at $v refused: $(grep 'return probe' "$W/err")"
exit 0
