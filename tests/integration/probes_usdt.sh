#!/bin/sh
# SPDX-License-Identifier: MIT
# usage: probes_usdt.sh UPROBE USDT_PROG USDT_LIBUSER
# USDT probes of a program built with <sys/sdt.h> (tests/targets/usdt_prog.c):
#   - `uprobe list --usdt` shows both probes, their semaphores and typed operands;
#   - u: specs through both backends, ptrace and the kernel's uprobe tracer (with its
#     (REF_CTR_OFFSET)): the same events, the same argument values ($argN from
#     registers, memory and a rip-relative symbol), the semaphore set in every round;
#   - untraced the semaphore is 0; attached to a running process it becomes 1 and
#     goes back to 0 when uprobe detaches;
#   - test:plain (room after its nop) runs on the fast path;
#   - the same u: spec written to a `uprobe mount`'s uprobe_events;
#   - a probe of a library the program needs (usdt_lib.c) is listed and traced
#     through the program's path, its semaphore set in the library's data;
#   - a wrong $argN, provider or name is refused with a caret.
set -u
uprobe=$1 prog=$2 libuser=$3
case $prog in missing:*) echo "SKIP: ${prog#missing:}"; exit 77 ;; esac
tmp=$(mktemp -d)
trap 'kill $bg 2>/dev/null; [ -e "$tmp/mnt/uprobe_events" ] && fusermount3 -u "$tmp/mnt" 2>/dev/null; rm -rf "$tmp"' EXIT
bg=
fail() { echo "FAIL: $*"; exit 1; }

"$uprobe" list --usdt "$prog" >"$tmp/list" || fail "list --usdt exited $?"
cat "$tmp/list"
grep -qE '^test:tick 0x[0-9a-f]+\(0x[0-9a-f]+\) \$arg1=%di:s32 \$arg2=\+0\(%si\):s64 \$arg3=\+8\(%si\):u64 \$arg4=%ax:s16$' "$tmp/list" ||
	fail "test:tick not listed with its semaphore and four typed operands"
grep -qE '^test:plain 0x[0-9a-f]+\(0x[0-9a-f]+\) \$arg1=@\+0x[0-9a-f]+:s32$' "$tmp/list" ||
	fail "test:plain not listed with its rip-relative operand"

"$prog" 3 >"$tmp/plain.out"
grep -q "round 3 sema 0" "$tmp/plain.out" || fail "the semaphore is set with nothing tracing"

# a private copy: the kernel's int3s then land in no other test's process
cp "$prog" "$tmp/t"
t=$tmp/t
run() { # BACKEND OUT
	"$uprobe" trace -b "$1" -e "u:uptest_kb/tick $t:test:tick i=\$arg1 id=\$arg2 label=+0(\$arg3):string neg=\$arg4" \
		-e "u:uptest_kb/plain $t:plain" -- "$t" 5 >"$2" 2>"$2.err"
}
run ptrace "$tmp/p.out" || { cat "$tmp/p.out.err"; fail "ptrace backend exited $?"; }
cat "$tmp/p.out"
grep -c "sema 1" "$tmp/p.out" | grep -qx 5 || fail "ptrace backend: the semaphore is not set in every round"
grep -q 'tick: (0x[0-9a-f]*) i=3 id=3000 label="alpha" neg=-3$' "$tmp/p.out" ||
	fail "ptrace backend: test:tick's arguments are wrong"
grep -q 'plain: (0x[0-9a-f]*) arg1=104$' "$tmp/p.out" || fail "ptrace backend: test:plain's argument is wrong"
# test:plain's nop has room after it: it runs on the fast path (a jmp, no stop)
plain=$(grep '^test:plain ' "$tmp/list" | sed -E 's/^test:plain 0x[0-9a-f]*([0-9a-f]{3})[(].*/\1/')
"$uprobe" trace -v -e "u $t:test:plain" -- "$t" 2 >/dev/null 2>"$tmp/fast.err" || fail "-v run exited $?"
grep -E "0x[0-9a-f]*$plain on the fast path" "$tmp/fast.err" ||
	{ cat "$tmp/fast.err"; fail "test:plain is not on the fast path"; }
if [ "$(id -u)" = 0 ] && { [ -d /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null; } &&
	[ -w /sys/kernel/tracing/uprobe_events ]; then
	run kernel "$tmp/k.out" || { cat "$tmp/k.out.err"; fail "kernel backend exited $?"; }
	norm() { grep -E ': (tick|plain): ' "$1" | sed -E 's/^.*: ((tick|plain): .*)$/\1/; s/0x[0-9a-f]{7,}([0-9a-f]{3})\b/0x...\1/g'; }
	norm "$tmp/p.out" >"$tmp/p.ev"
	norm "$tmp/k.out" >"$tmp/k.ev"
	echo "ptrace backend: $(wc -l <"$tmp/p.ev") events, kernel backend: $(wc -l <"$tmp/k.ev") events"
	[ "$(wc -l <"$tmp/p.ev")" = 10 ] || fail "expected 10 events"
	diff -u "$tmp/k.ev" "$tmp/p.ev" || fail "the backends disagree (- kernel, + ptrace)"
	grep -c "sema 1" "$tmp/k.out" | grep -qx 5 || fail "kernel backend: the semaphore is not set"
else
	echo "note: no writable tracefs: the kernel backend is not compared"
fi

# The background program ($bg, printing into $1) is stopped; its rounds must show the
# semaphore 0, then 1 while probed, then 0 again.
sema_runs() { # OUT WHAT
	kill $bg 2>/dev/null
	wait $bg 2>/dev/null
	bg=
	awk '{ print $4 }' "$1" | uniq -c | tr -s ' ' >"$1.runs"
	echo "$2: semaphore over the rounds (count value): $(tr '\n' ';' <"$1.runs")"
	[ "$(awk '{ print $2 }' "$1.runs" | tr -d '\n')" = 010 ] ||
		fail "$2: expected the semaphore 0, then 1 while probed, then 0 again"
}

# attach to a running process: the semaphore is 1 only while it is probed
"$t" 400 25 >"$tmp/bg.out" &
bg=$!
sleep 0.3
timeout -s INT 1 "$uprobe" trace -p $bg -e "u $t:test:tick" >"$tmp/att.out" 2>"$tmp/att.err"
sleep 0.5
sema_runs "$tmp/bg.out" "attached with -p"
grep -q "tick: " "$tmp/att.out" || fail "no event while attached"

# the same through the control filesystem: a u: line written to uprobe_events
if command -v fusermount3 >/dev/null 2>&1 && [ -c /dev/fuse ]; then
	mkdir "$tmp/mnt"
	"$t" 400 20 >"$tmp/fsbg.out" &
	bg=$!
	# attached at once, perhaps to the shell's child before its exec (the engine opens
	# its memory again once seized: an exec in between left the first descriptor on
	# the old image, and the write below failed with ESRCH, 1 run in 25 under load)
	"$uprobe" mount -p $bg "$tmp/mnt" 2>"$tmp/fs.err" &
	fsd=$!
	for i in 1 2 3 4 5 6 7 8 9 10; do [ -e "$tmp/mnt/uprobe_events" ] && break; sleep 0.2; done
	echo "u:uptest_fs/tick $t:test:tick i=\$arg1" >>"$tmp/mnt/uprobe_events" || fail "the mount refused a u: line"
	cat "$tmp/mnt/uprobe_events"
	grep -qE "^p:uptest_fs/tick $t:0x[0-9a-f]+\(0x[0-9a-f]+\) i=%di:s32$" "$tmp/mnt/uprobe_events" ||
		fail "the mount does not list the u: line as its p: line"
	echo 1 >"$tmp/mnt/events/uptest_fs/tick/enable" # made disabled, as the kernel makes it
	sleep 0.5
	grep -q ' tick: .* i=[0-9]' "$tmp/mnt/trace" || fail "no tick event through the mount"
	fusermount3 -u "$tmp/mnt"
	wait $fsd
	sleep 0.4
	sema_runs "$tmp/fsbg.out" "through the mount"
else
	echo "note: no FUSE here: the control filesystem is not checked"
fi

# a library's probe, through the program that needs it
"$uprobe" list --usdt "$libuser" >"$tmp/liblist" || fail "list --usdt of the library's user exited $?"
cat "$tmp/liblist"
grep -qE '^/.*/libusdt_lib.so:testlib:hello 0x[0-9a-f]+\(0x[0-9a-f]+\) \$arg1=%[a-z0-9]+:s32$' "$tmp/liblist" ||
	fail "the library's probe is not listed with its path"
"$libuser" 3 | grep -qx "probed 0 of 3" || fail "the library's semaphore is set with nothing tracing"
"$uprobe" trace -e "u $libuser:testlib:hello" -- "$libuser" 3 >"$tmp/lib.out" 2>&1 ||
	{ cat "$tmp/lib.out"; fail "tracing the library's probe exited $?"; }
cat "$tmp/lib.out"
grep -qx "probed 3 of 3" "$tmp/lib.out" || fail "the library's semaphore was not set"
grep -q 'hello: (0x[0-9a-f]*) arg1=20$' "$tmp/lib.out" || fail "the library's probe: wrong argument"

# refusals, with a caret
"$uprobe" trace -e "u $t:test:tick x=\$arg5" -- true >/dev/null 2>"$tmp/e1" && fail "\$arg5 accepted"
cat "$tmp/e1"
grep -q 'test:tick has 4 arguments' "$tmp/e1" && grep -q '^ *\^~~~~$' "$tmp/e1" || fail "no caret for \$arg5"
"$uprobe" trace -e "u $t:test:nosuch" -- true >/dev/null 2>"$tmp/e2" && fail "a missing probe accepted"
grep -q 'no USDT probe test:nosuch' "$tmp/e2" || { cat "$tmp/e2"; fail "missing probe: no clear error"; }
echo PASS
