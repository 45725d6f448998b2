#!/bin/sh
# SPDX-License-Identifier: MIT
# ftrace.*: the kernel's own ftrace selftests for uprobe events, run by its ftracetest
# harness against `uprobe mount` (README here says where they come from).
#
# usage: run.sh UPROBE WORKDIR TEST.tc...   (TEST: a path under the harness's test.d/)
# The harness and tests are taken from Debian's linux-source-6.12 (FTRACE_SRC: another
# tarball or an unpacked selftests/ftrace directory) into WORKDIR once, ftracetest is
# given its one change (its tracing dir from FTRACE_MNT; sched_rt_runtime_us left alone),
# and our add_remove_uprobe_maps.tc is put beside add_remove_uprobe.tc.  Then:
#   uprobe mount DIR -- env FTRACE_MNT=DIR sh ./ftracetest -l - TEST...
# passes when every test passes.  Exit 77 (SKIP) with the reason when it cannot run here.
set -u
mkdir -p "$2" || exit 1
UPROBE=$(command -v "$1") || { echo "FAIL: $1 not found"; exit 1; }
case $UPROBE in /*) ;; *) UPROBE=$(pwd)/$UPROBE ;; esac
WORK=$(cd "$2" && pwd)
shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=${FTRACE_SRC:-/usr/src/linux-source-6.12.tar.xz}
F=$WORK/ftrace

skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "ftracetest runs as root only"
[ -c /dev/fuse ] || skip "/dev/fuse is missing"
command -v fusermount3 >/dev/null || skip "fusermount3 not found (Debian package fuse3)"

if [ ! -f "$F/.ready" ]; then
	rm -rf "$F" "$WORK/ftrace.tmp"
	mkdir -p "$WORK/ftrace.tmp" || exit 1
	if [ -d "$SRC" ]; then
		cp -r "$SRC/." "$WORK/ftrace.tmp/" || exit 1
	else
		[ -f "$SRC" ] || skip "$SRC not found (Debian package linux-source-6.12; scripts/setup.sh installs it)"
		tar xJf "$SRC" -C "$WORK/ftrace.tmp" --wildcards --strip-components=5 \
			'*/tools/testing/selftests/ftrace/ftracetest' \
			'*/tools/testing/selftests/ftrace/test.d/functions' \
			'*/tools/testing/selftests/ftrace/test.d/dynevent/add_remove_uprobe.tc' \
			'*/tools/testing/selftests/ftrace/test.d/kprobe/uprobe_syntax_errors.tc' ||
			{ echo "FAIL: cannot unpack the ftrace selftests from $SRC"; exit 1; }
	fi
	T=$WORK/ftrace.tmp
	# the one change: the tracing dir from FTRACE_MNT, sched_rt_runtime_us left alone
	sed -i -e 's|^TRACING_DIR=`grep tracefs /proc/mounts \(.*\)`$|TRACING_DIR=${FTRACE_MNT:-`grep tracefs /proc/mounts \1`}|' \
		-e 's|^\(  *\)echo \(.*\) > \$sched_rt_runtime$|\1[ -n "${FTRACE_MNT:-}" ] \|\| echo \2 > $sched_rt_runtime|' \
		"$T/ftracetest"
	[ "$(grep -c 'FTRACE_MNT' "$T/ftracetest")" -eq 3 ] ||
		{ echo "FAIL: ftracetest in $SRC is not the one run.sh knows how to change"; exit 1; }
	cp "$HERE/add_remove_uprobe_maps.tc" "$T/test.d/dynevent/" || exit 1
	touch "$T/.ready"
	mv "$T" "$F" || exit 1
fi

M=$(mktemp -d /tmp/uprobe-ftrace.XXXXXX)
cd "$F" || exit 1
# through a pipe: the harness truncates its standard output (> /proc/self/fd/1) per test
{
	timeout -s KILL 120 "$UPROBE" mount "$M" -- env FTRACE_MNT="$M" sh ./ftracetest -l - "$@" 2>&1
	echo $? > "$WORK/ftrace.status"
} | cat > "$WORK/ftrace.out"
st=$(cat "$WORK/ftrace.status")
cat "$WORK/ftrace.out"
fusermount3 -u "$M" 2>/dev/null
rmdir "$M" 2>/dev/null
[ $st -eq 137 ] && { echo "FAIL: ftracetest did not finish in 120 s"; exit 1; }
n=$#
grep -q "^# of passed:  *$n\$" "$WORK/ftrace.out" || { echo "FAIL: not $n passed (exit $st)"; exit 1; }
[ $st -eq 0 ] || { echo "FAIL: uprobe mount exited $st"; exit 1; }
echo "ok: $n/$n passed"
