#!/bin/sh
# SPDX-License-Identifier: MIT
# usage: probes_python.sh UPROBE
# Python 3.11's own USDT probes (Debian's /usr/bin/python3.11, whose probes are all
# guarded by semaphores): python:function__entry with its filename, funcname and
# lineno arguments through the ptrace backend and through the kernel's uprobe tracer
# (with (REF_CTR_OFFSET)): the same events with the same values, in the same order.
set -u
uprobe=$1
py=/usr/bin/python3.11
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
[ -x $py ] || { echo "SKIP: no $py (apt-get install python3.11)"; exit 77; }
"$uprobe" list --usdt $py 'python:function__entry' >"$tmp/list" 2>&1 ||
	{ echo "SKIP: $py has no python:function__entry USDT probe"; exit 77; }
cat "$tmp/list"
if [ "$(id -u)" != 0 ]; then echo "SKIP: the kernel backend needs root"; exit 77; fi
[ -d /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null
[ -w /sys/kernel/tracing/uprobe_events ] || { echo "SKIP: no writable uprobe_events"; exit 77; }
cat >"$tmp/s.py" <<'PY'
def f(n):
    return n + 1
def g(n):
    return sorted(range(n), key=f)
print(sum(map(f, range(100))), len(g(30)))
PY
# (3.11 fires function__entry where the eval loop is entered, not for the calls it
# inlines; line fires for every line run)
spec="u:uptest_kb/entry $py:python:function__entry file=+0(\$arg1):string name=+0(\$arg2):string line=\$arg3"
lspec="u:uptest_kb/line $py:python:line file=+0(\$arg1):string name=+0(\$arg2):string line=\$arg3"
for b in ptrace kernel; do
	# the script's output apart from the trace: Python's stdout setup differs on a
	# file already written to (codecs setstate calls)
	"$uprobe" trace -b $b -o "$tmp/$b.out" -e "$spec" -e "$lspec" -- $py "$tmp/s.py" \
		>"$tmp/$b.py" 2>"$tmp/$b.err" || { cat "$tmp/$b.err"; fail "$b backend exited $?"; }
	grep -E ': (entry|line): ' "$tmp/$b.out" | sed -E 's/^.*: ((entry|line): .*)$/\1/' >"$tmp/$b.ev"
	grep -qx '5050 30' "$tmp/$b.py" || fail "$b backend: the script's output changed"
done
np=$(grep -c '^entry' "$tmp/ptrace.ev") nk=$(grep -c '^entry' "$tmp/kernel.ev")
lp=$(grep -c '^line' "$tmp/ptrace.ev") lk=$(grep -c '^line' "$tmp/kernel.ev")
echo "python:function__entry hits: ptrace backend $np, kernel backend $nk"
echo "python:line hits: ptrace backend $lp, kernel backend $lk"
grep '^entry' "$tmp/ptrace.ev" | head -3
grep "s.py" "$tmp/ptrace.ev" | head -3
[ "$np" -gt 0 ] || fail "no function__entry event"
grep -q "^line: .* file=\"$tmp/s.py\" name=\"f\" line=2\$" "$tmp/ptrace.ev" ||
	fail "the script's own lines are not seen"
diff -u "$tmp/kernel.ev" "$tmp/ptrace.ev" || fail "the backends disagree (- kernel, + ptrace)"
echo PASS
