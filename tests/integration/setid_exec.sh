#!/bin/sh
# SPDX-License-Identifier: MIT
# usage: setid_exec.sh UPROBE
# An unprivileged tracer launching a set-uid program: the kernel runs it without its
# privileges; uprobe must say so (and the program still runs).  Skipped where there is
# no setpriv, no set-uid /usr/bin/passwd, or the uprobe binary is not reachable for uid
# 65534.
set -u
uprobe=$1
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root to drop to uid 65534"; exit 77; }
command -v setpriv >/dev/null 2>&1 || { echo "SKIP: no setpriv"; exit 77; }
[ -u /usr/bin/passwd ] || { echo "SKIP: /usr/bin/passwd is not set-uid"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$uprobe" "$tmp/uprobe" && chmod 755 "$tmp" "$tmp/uprobe"
out=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$tmp/uprobe" trace -c \
	-e 'p:t/getuid /lib/x86_64-linux-gnu/libc.so.6:getuid' -- /usr/bin/passwd -S root 2>&1)
echo "$out"
echo "$out" | grep -q "runs a set-uid program: traced, the kernel runs it without those privileges" ||
	{ echo "FAIL: no message about the set-uid program"; exit 1; }
echo "$out" | grep -qE 't/getuid +[1-9]' || { echo "FAIL: the program did not run traced"; exit 1; }
echo PASS
