#!/bin/sh
# SPDX-License-Identifier: MIT
# usage: valgrind_trace.sh UPROBE SAMPLE
# The tracer under valgrind (memcheck): a trace with every kind of probe -- seed D/S/A,
# p: with fetch arguments, r: with $retval, a libc probe found through the dynamic
# linker, a counting fast-path probe -- must be free of memory errors and definite
# leaks, and the traced program's output must be as without the tracer.
set -u
uprobe=$1 sample=$2
command -v valgrind >/dev/null 2>&1 || { echo "SKIP: valgrind is not installed"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
foo=$("$uprobe" list "$sample" foo | awk '{print $1}')
g=$(nm "$sample" | awk '/ global_str$/{print $1}')
libc=/lib/x86_64-linux-gnu/libc.so.6
printf ab | valgrind -q --error-exitcode=9 --leak-check=full --errors-for-leak-kinds=definite \
	"$uprobe" trace -e "up 0 $foo S 32" -e "up 0 $foo D $g 15" -e "up 0 $foo A 5" \
	-e "p:t/foo $sample:foo a=%di:s32 c=%dx:x64 e=%r8:s8" -e "r:t/fooret $sample:foo rv=\$retval:s32" \
	-e "p:t/getc $libc:getchar" -- "$sample" >"$tmp/out" 2>"$tmp/err"
st=$?
cat "$tmp/err"
[ $st = 0 ] || { echo "FAIL: valgrind or the trace exited $st"; exit 1; }
n=$(grep -c ': foo: (' "$tmp/out")
[ "$n" = 2 ] || { echo "FAIL: $n foo events, expected 2"; cat "$tmp/out"; exit 1; }
grep -q 'A ARG 5: 0000000000000048' "$tmp/out" || { echo "FAIL: no seed A line"; exit 1; }
printf ab | valgrind -q --error-exitcode=9 --leak-check=full --errors-for-leak-kinds=definite \
	"$uprobe" trace -c -e "p:t/foo $sample:foo" -- "$sample" >"$tmp/out2" 2>"$tmp/err2"
st=$?
cat "$tmp/err2"
[ $st = 0 ] || { echo "FAIL: valgrind or the count run exited $st"; exit 1; }
grep -qE 't/foo +2$' "$tmp/err2" || { echo "FAIL: counts"; cat "$tmp/err2"; exit 1; }
echo PASS
