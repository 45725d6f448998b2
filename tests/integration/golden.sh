#!/bin/sh
# SPDX-License-Identifier: MIT
# usage: golden.sh UPROBE GOLDEN_DIR NAME FILE SYMBOL...
# Compares `uprobe decode --asm FILE SYMBOL` with GOLDEN_DIR/NAME-SYMBOL.txt for each
# SYMBOL.  With UPROBE_REGEN=1 in the environment it rewrites the golden files instead
# (on purpose: review the diff before committing it).
uprobe=$1
golden=$2
name=$3
file=$4
shift 4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
for sym in "$@"; do
	want="$golden/$name-$sym.txt"
	got="$tmp/$name-$sym.txt"
	if ! "$uprobe" decode --asm "$file" "$sym" >"$got"; then
		echo "FAIL: uprobe decode --asm $file $sym exited non-zero"
		status=1
		continue
	fi
	if [ "${UPROBE_REGEN:-0}" = 1 ]; then
		cp "$got" "$want"
		echo "regenerated $want ($(wc -l <"$want") lines)"
	elif [ ! -f "$want" ]; then
		echo "FAIL: $want is missing; create it with UPROBE_REGEN=1 ctest -R golden"
		status=1
	elif diff -u "$want" "$got"; then
		echo "ok: $sym matches $want ($(wc -l <"$want") lines)"
	else
		echo "FAIL: uprobe decode --asm $file $sym differs from $want (- golden, + now);"
		echo "      if the change is intended, rerun with UPROBE_REGEN=1 and commit the diff"
		status=1
	fi
done
[ $status = 0 ] && echo PASS
exit $status
