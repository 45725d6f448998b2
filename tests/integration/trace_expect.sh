#!/bin/sh
# SPDX-License-Identifier: MIT
# usage: trace_expect.sh STATUS REGEX[;;REGEX...] COMMAND [ARGS...]
# Runs COMMAND (an `uprobe trace` invocation) with stdin from /dev/null and passes when
# it exits with STATUS, some line of its stdout+stderr matches each extended regular
# expression REGEX, and no line says RAN (the launched `sh -c 'echo RAN'` must not have
# run).
want=$1
regex=$2
shift 2
out=$(timeout 15 "$@" </dev/null 2>&1)
got=$?
printf '$ %s\n%s\n[exit %s]\n' "$*" "$out" "$got"
if [ "$got" != "$want" ]; then
	echo "FAIL: exit status $got, expected $want"
	exit 1
fi
rest=$regex
while [ -n "$rest" ]; do
	re=${rest%%;;*}
	case $rest in *';;'*) rest=${rest#*;;} ;; *) rest= ;; esac
	if ! printf '%s\n' "$out" | grep -Eq -- "$re"; then
		echo "FAIL: no line matches /$re/"
		exit 1
	fi
done
if printf '%s\n' "$out" | grep -qx RAN; then
	echo "FAIL: the command ran"
	exit 1
fi
echo PASS
