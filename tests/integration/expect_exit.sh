#!/bin/sh
# SPDX-License-Identifier: MIT
# usage: expect_exit.sh STATUS REGEX COMMAND [ARGS...]
# Runs COMMAND and passes when it exits with STATUS and its stdout+stderr match the
# extended regular expression REGEX.  Prints what it ran and what came out.
want=$1
regex=$2
shift 2
out=$("$@" 2>&1)
got=$?
printf '$ %s\n%s\n[exit %s]\n' "$*" "$out" "$got"
if [ "$got" != "$want" ]; then
	echo "FAIL: exit status $got, expected $want"
	exit 1
fi
if ! printf '%s\n' "$out" | grep -Eq -- "$regex"; then
	echo "FAIL: output does not match /$regex/"
	exit 1
fi
echo PASS
