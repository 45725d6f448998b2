#!/bin/sh
# SPDX-License-Identifier: MIT
# usage: trace_backends.sh UPROBE TARGET
# The same p:/r: specs through both backends -- ptrace (ours) and the kernel's uprobe
# tracer (--backend kernel) -- on the same program: the events, their addresses and
# every argument value must agree line for line (the context prefix, pid, cpu and
# time differ and are cut).  Skipped (77) where tracefs cannot be used.
set -u
uprobe=$1 target=$2
libc=/lib/x86_64-linux-gnu/libc.so.6
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ "$(id -u)" != 0 ]; then echo "SKIP: the kernel backend needs root"; exit 77; fi
[ -d /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null
if [ ! -w /sys/kernel/tracing/uprobe_events ]; then
	echo "SKIP: no writable /sys/kernel/tracing/uprobe_events"; exit 77
fi
# a private copy: the kernel's int3s then land in no other test's process
cp "$target" "$tmp/t"
t=$tmp/t
grp=upbk$$
set -- \
	"p:$grp/work $t:work n=%di:s32 mask=%si:x64 name=+0(%dx):string id=+0(%cx):x64 val=+8(%cx):u32" \
	"r:$grp/workret $t:work rv=\$retval:s32" \
	"p:$grp/getppid $libc:getppid"
args=""
for s in "$@"; do args="$args -e '$s'"; done
run() { # BACKEND OUT
	eval "\"$uprobe\" trace -b $1 $args -- \"$t\" 6 3" >"$2" 2>"$2.err"
}
norm() { # keep "EVENT: (addr...) args" of our events, the pid and the time cut; libc is
	 # mapped elsewhere in each run (ASLR): its addresses keep their page offset only
	grep -E ": (work|workret|getppid): " "$1" | sed -E 's/^.*: ((work|workret|getppid): .*)$/\1/' |
		sed -E 's/0x[0-9a-f]{7,}([0-9a-f]{3})\b/0x...\1/g'
}
run ptrace "$tmp/p.out" || { echo "FAIL: ptrace backend exited $?"; cat "$tmp/p.out.err"; exit 1; }
run kernel "$tmp/k.out" || { echo "FAIL: kernel backend exited $?"; cat "$tmp/k.out.err"; exit 1; }
norm "$tmp/p.out" >"$tmp/p.ev"
norm "$tmp/k.out" >"$tmp/k.ev"
np=$(wc -l <"$tmp/p.ev") nk=$(wc -l <"$tmp/k.ev")
echo "ptrace backend: $np events, kernel backend: $nk events"
if [ "$np" -lt 15 ]; then echo "FAIL: expected 6+6+3 events"; cat "$tmp/p.out"; exit 1; fi
if ! diff -u "$tmp/k.ev" "$tmp/p.ev"; then
	echo "FAIL: the backends disagree (- kernel, + ptrace)"
	exit 1
fi
# the program's own output is the same under both, but for the return address work()
# sees: a return probe's trampoline in both, at different places
grep -vE ": (work|workret|getppid): " "$tmp/p.out" | sed -E 's/ 0x[0-9a-f]+$//' >"$tmp/p.prog"
grep -vE ": (work|workret|getppid): " "$tmp/k.out" | sed -E 's/ 0x[0-9a-f]+$//' >"$tmp/k.prog"
diff -u "$tmp/k.prog" "$tmp/p.prog" >/dev/null || { echo "FAIL: the program's output differs"; exit 1; }
# only the command's calls: nothing uprobe's own runs traced before the exec (execvp's
# getenv("PATH") in the kernel backend's child once was)
for b in ptrace kernel; do
	"$uprobe" trace -b $b -c -e "p:$grp/getenv $libc:getenv" -- ls -l / >"$tmp/$b.cnt" 2>&1 ||
		{ echo "FAIL: -c -b $b exited $?"; cat "$tmp/$b.cnt"; exit 1; }
	eval "n_$b=\$(grep \" $grp/getenv \" \"\$tmp/\$b.cnt\" | awk '{print \$NF}')"
done
echo "getenv calls of ls -l: ptrace backend $n_ptrace, kernel backend $n_kernel"
[ -n "$n_ptrace" ] && [ "$n_ptrace" -gt 0 ] && [ "$n_ptrace" = "$n_kernel" ] ||
	{ echo "FAIL: the backends count getenv differently"; exit 1; }
# a process that execs: each event is named by the program that made it (env's getenv
# calls as env, printenv's as printenv).  Not compared with the kernel backend: the
# kernel names an event at output time from its saved_cmdlines, which may already hold
# the new name (seen both ways here)
"$uprobe" trace -e "p:$grp/getenv $libc:getenv" -- env -i LANG=C printenv LANG 2>/dev/null |
	grep " getenv: " | awk '{ sub(/-[0-9]+$/, "", $1); print $1 }' | sort | uniq -c >"$tmp/comm"
echo "getenv callers of env -i printenv: $(tr -s ' \n' ' ' <"$tmp/comm")"
grep -qE '^ *[0-9]+ env$' "$tmp/comm" && grep -qE '^ *[0-9]+ printenv$' "$tmp/comm" ||
	{ echo "FAIL: events are not named by the program that made them"; exit 1; }
echo PASS
