#!/bin/sh
# SPDX-License-Identifier: MIT
# usage: setid_follow.sh UPROBE REL_SETID
# An unprivileged tracer whose traced program execs a set-uid program of another user
# (root): uprobe does not follow the exec.  It says so, the probes of the old image
# counted, the new image's probe never hit, the program runs on untraced, and the
# exit status is the program's.
set -u
uprobe=$1
target=$2
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root to make a set-uid file and drop to uid 65534"; exit 77; }
command -v setpriv >/dev/null 2>&1 || { echo "SKIP: no setpriv"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
cp "$uprobe" "$tmp/uprobe"
cp "$target" "$tmp/plain"
cp "$target" "$tmp/suid"
chown root:root "$tmp/suid"
chmod 4755 "$tmp/suid"
# a nosuid /tmp would make the test meaningless
if ! setpriv --reuid=65534 --regid=65534 --clear-groups "$tmp/suid" | grep -q "euid=0 "; then
	echo "SKIP: set-uid files do not take effect under $tmp (nosuid?)"
	exit 77
fi
out=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$tmp/uprobe" trace -c \
	-e "p:t/plain $tmp/plain:probed_setid_work" -e "p:t/suid $tmp/suid:probed_setid_work" \
	-- "$tmp/plain" exec "$tmp/suid" 2>&1)
status=$?
echo "$out"
echo "exit status $status"
fail() { echo "FAIL: $*"; exit 1; }
echo "$out" | grep -q "exec'd $tmp/suid, set-uid 0: not followed" ||
	fail "no message about the set-uid exec not followed"
echo "$out" | grep -qE 't/plain +100( |$)' || fail "the old image's probe did not count 100 hits"
echo "$out" | grep -qE 't/suid +[1-9]' && fail "the set-uid image was probed"
echo "$out" | grep -q "traced=no euid=65534 checksum=14950" ||
	fail "the set-uid program did not run on untraced (or its output is wrong)"
[ "$status" = 5 ] || fail "exit status $status, not the program's 5"
echo PASS
