#!/bin/sh
# SPDX-License-Identifier: MIT
# usage: probes_dwarf.sh UPROBE PROG_O0 PROG_O2
# DWARF probes (tests/targets/dwarf_prog.c built with -g at -O0 and -O2):
#   - PATH:FUNC with parameters, a char * and struct fields by name (r->peer.port,
#     a char array r->peer.host): the values the program passed, in registers at
#     -O2, on the stack at -O0; the kernel's uprobe tracer (--backend kernel) reads
#     the same values from the same specs;
#   - PATH:FILE.c:LINE and PATH:FUNC:LINE (perf's relative line) with a local;
#   - a variable optimized out at the probe address is refused with a caret and why;
#   - `uprobe list --vars` shows what can be fetched where;
#   - the DWARF of a separate debug file (.gnu_debuglink, build-id) is used;
#   - a file without debug information is refused clearly.
set -u
uprobe=$1 o0=$2 o2=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cp "$o0" "$tmp/o0"
cp "$o2" "$tmp/o2"
args='r->id flags tag r->name r->peer.port r->peer.host'
want='r_id=101 flags=1 tag="odd" r_name="beta" r_peer_port=8001 r_peer_host="h1.test"'
kernel=0
if [ "$(id -u)" = 0 ] && { [ -d /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null; } &&
	[ -w /sys/kernel/tracing/uprobe_events ]; then
	kernel=1
fi
for o in o0 o2; do
	"$uprobe" trace -e "p:uptest_kb/handle $tmp/$o:handle $args" -- "$tmp/$o" 3 >"$tmp/$o.p" 2>&1 ||
		{ cat "$tmp/$o.p"; fail "$o: ptrace backend exited $?"; }
	grep 'handle:' "$tmp/$o.p"
	grep -q "handle: (0x[0-9a-f]*) $want\$" "$tmp/$o.p" || fail "$o: wrong values"
	[ "$(grep -c 'handle:' "$tmp/$o.p")" = 3 ] || fail "$o: expected 3 events"
	if [ $kernel = 1 ]; then
		"$uprobe" trace -b kernel -e "p:uptest_kb/handle $tmp/$o:handle $args" -- "$tmp/$o" 3 >"$tmp/$o.k" 2>&1 ||
			{ cat "$tmp/$o.k"; fail "$o: kernel backend exited $?"; }
		for b in p k; do
			grep 'handle:' "$tmp/$o.$b" | sed -E 's/^.*(handle: .*)$/\1/; s/0x[0-9a-f]*([0-9a-f]{3})\)/0x...\1)/' >"$tmp/$o.$b.ev"
		done
		diff -u "$tmp/$o.k.ev" "$tmp/$o.p.ev" || fail "$o: the backends disagree (- kernel, + ptrace)"
	fi
done
[ $kernel = 1 ] || echo "note: no writable tracefs: the kernel backend is not compared"

# source lines, and a local on the stack at -O0 (line 31 runs for odd flags only)
"$uprobe" trace -e "p $tmp/o0:dwarf_prog.c:31 cost r->peer.port" -e "p:l/rel $tmp/o0:handle:7 flags" \
	-- "$tmp/o0" 4 >"$tmp/line" 2>&1 || { cat "$tmp/line"; fail "line probes exited $?"; }
cat "$tmp/line"
grep -q 'handle_L31: (0x[0-9a-f]*) cost=16385 r_peer_port=8001$' "$tmp/line" || fail "FILE:LINE: wrong values"
grep -q 'handle_L31: (0x[0-9a-f]*) cost=32771 r_peer_port=8003$' "$tmp/line" || fail "FILE:LINE: wrong values"
[ "$(grep -c 'rel: ' "$tmp/line")" = 2 ] && grep -q 'rel: (0x[0-9a-f]*) flags=3$' "$tmp/line" ||
	fail "FUNC:LINE: expected flags=1 and flags=3"

# optimized out at -O2: refused, with a caret under the variable and the reason
"$uprobe" trace -e "p $tmp/o2:handle flags cost" -- "$tmp/o2" 1 >"$tmp/e1" 2>&1 && fail "optimized-out variable accepted"
cat "$tmp/e1"
grep -q "'cost' at handle (.*): optimized out at this address" "$tmp/e1" && grep -q '^ *\^~~~$' "$tmp/e1" ||
	fail "no clear error for an optimized-out variable"
"$uprobe" trace -e "p $tmp/o2:handle r->nosuch" -- "$tmp/o2" 1 >"$tmp/e2" 2>&1 && fail "a missing field accepted"
grep -q "struct req has no field 'nosuch'" "$tmp/e2" || { cat "$tmp/e2"; fail "missing field: no clear error"; }

"$uprobe" list --vars "$tmp/o2" handle >"$tmp/vars" || fail "list --vars exited $?"
cat "$tmp/vars"
grep -qE '^handle @ 0x[0-9a-f]+ \(.*dwarf_prog.c:[0-9]+\)$' "$tmp/vars" &&
	grep -qE '^ +struct req \* +r +%di:x64$' "$tmp/vars" &&
	grep -qE '^ +const char \* +tag +\+0\(%dx\):string$' "$tmp/vars" &&
	grep -qE '^ +long int +cost +\(optimized out at this address\)$' "$tmp/vars" ||
	fail "list --vars: unexpected output"

# the DWARF of a separate debug file, found as the symbols' is: by .gnu_debuglink next
# to the file, and by build-id under a debug root
objcopy --only-keep-debug "$o2" "$tmp/o2.debug" && strip --strip-all -o "$tmp/o2link" "$o2" &&
	objcopy --add-gnu-debuglink="$tmp/o2.debug" "$tmp/o2link" || fail "objcopy"
UPROBE_DEBUG_DIRS= "$uprobe" trace -e "p:uptest_kb/handle $tmp/o2link:handle $args" -- "$tmp/o2link" 3 >"$tmp/link" 2>&1 ||
	{ cat "$tmp/link"; fail "through .gnu_debuglink: exited $?"; }
grep -q "handle: (0x[0-9a-f]*) $want\$" "$tmp/link" || { cat "$tmp/link"; fail "through .gnu_debuglink: wrong values"; }
id=$(readelf -n "$o2" | sed -n 's/.*Build ID: \([0-9a-f]*\).*/\1/p')
if [ -n "$id" ]; then
	mkdir -p "$tmp/root/.build-id/$(echo "$id" | cut -c1-2)"
	cp "$tmp/o2.debug" "$tmp/root/.build-id/$(echo "$id" | cut -c1-2)/$(echo "$id" | cut -c3-).debug"
	strip --strip-all -o "$tmp/o2bid" "$o2"
	UPROBE_DEBUG_DIRS="$tmp/root" "$uprobe" trace -e "p:uptest_kb/handle $tmp/o2bid:handle $args" -- "$tmp/o2bid" 3 >"$tmp/bid" 2>&1 ||
		{ cat "$tmp/bid"; fail "through the build-id: exited $?"; }
	grep -q "handle: (0x[0-9a-f]*) $want\$" "$tmp/bid" || { cat "$tmp/bid"; fail "through the build-id: wrong values"; }
	echo "ok: DWARF from a debug file found by .gnu_debuglink and by build-id"
fi

cp "$o2" "$tmp/stripped" && strip --strip-debug "$tmp/stripped"
UPROBE_DEBUG_DIRS= "$uprobe" trace -e "p $tmp/stripped:handle flags" -- "$tmp/stripped" 1 >"$tmp/e3" 2>&1 &&
	fail "a variable without debug information accepted"
grep -q 'no debug information (DWARF)' "$tmp/e3" || { cat "$tmp/e3"; fail "no clear error without DWARF"; }
echo PASS
