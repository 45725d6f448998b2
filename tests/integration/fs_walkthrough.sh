#!/bin/sh
# SPDX-License-Identifier: MIT
# fs.*: `uprobe mount DIR` driven from plain shell (echo, cat, >, >>) as seed 008's
# walkthrough drives /sys/kernel/tracing, against the seed's sample reading a fifo.
#
# usage: fs_walkthrough.sh MODE UPROBE SAMPLE
#   seed       the walkthrough word for word: four `up PID ...` lines, cat uprobe_events
#              (the seed's listing), two hits, cat trace (the seed's header, S/D/A lines:
#              A exactly the seed's, D the bytes of global_str), then `>` with the string
#              global_str_p points to (clears, trace reset, the seed's three D lines), then
#              `echo > uprobes_events` (no probe left)
#   remove     `-:GRP/EVENT` removes one probe, `-:` of a missing one fails
#   error_log  a bad line fails the write (the shell sees it), error_log has the message,
#              the line and a caret under the offending token; `echo > error_log` clears
#   pipe       trace_pipe blocks, returns the lines as they come and consumes them;
#              a blocked reader can be interrupted
#   tracing_on 0: hits are not recorded; 1 again: they are
#   event      a p: spec through the mount (set_event_pid brings the process in), its
#              events/GRP/EVENT/enable and filter, uprobe_profile
#   hist       events/GRP/EVENT/trigger takes a hist trigger (listed as the kernel lists
#              it), hist shows the table (3 hits of one key), a bad trigger is refused with
#              error_log's "hist:GRP:EVENT: error:" and a caret, "!hist:..." removes it
#   hang_pid   `sh -c 'echo $$ > set_event_pid'` returns (the daemon attaches the very
#              process blocked in the write) within 10 s, and the shell is then traced
#   hang_write a traced shell writes a probe on its own program to uprobe_events and reads
#              it back within 10 s (placing it stops the writer); a traced `cat trace_pipe`
#              blocked in a read does not hold up a probe placed in its process either
#   reach      the sample untraced, the mount started with --comm sample: enabling a p:
#              event on its file brings it in (the kernel's probe fires in every process
#              that maps the file) and records its hit; the shell that started the mount
#              is not reached
#   reach_none the same without --all/--uid/--comm: enabling reaches nothing (the sample
#              stays untraced) and says nothing is reached
#   reach_scope the hang of issue 29: the mount started (--all --comm upfsreach) from a
#              shell of that comm that maps libc, a probe on libc's malloc by path
#              enabled: the write returns within 2 s, the starting shell and this script
#              are never traced, a sibling shell of that comm is
#   command    `uprobe mount DIR -- COMMAND`: COMMAND sees DIR, a probe by path fires in
#              a program it starts, uprobe exits with COMMAND's status, DIR goes with it
#   oracle     the kernel's tracefs as the oracle (SKIP without uprobe events there): the
#              same event line written to both, then uprobe_events, dynamic_events, the
#              new event's enable, its format (but the ID), the group's enable,
#              uprobe_profile, and error_log's message and caret for bad lines, compared;
#              the kernel's event has a group of its own and is removed after
#   unmount    fusermount3 -u: the daemon exits, the sample runs on untraced, finishes 0
#   sigterm    the same through SIGTERM on the daemon
# Exit 77 (SKIP) with the reason when FUSE cannot be used here.
set -u
MODE=$1
UPROBE=$2
SAMPLE=$3

skip() { echo "SKIP: $*"; cleanup; exit 77; }
fail() { echo "FAIL: $*"; [ -s "$W/daemon.err" ] && sed 's/^/  daemon: /' "$W/daemon.err"; cleanup; exit 1; }
ok() { echo "ok: $*"; }

W=$(mktemp -d /tmp/uprobe-fs.XXXXXX)
M=$W/mnt
SPID= DPID= CPID=
cleanup() {
	trap - EXIT
	[ -n "$CPID" ] && kill "$CPID" 2>/dev/null
	if [ -n "$DPID" ] && kill -0 "$DPID" 2>/dev/null; then
		fusermount3 -u "$M" 2>/dev/null
		kill "$DPID" 2>/dev/null
		wait "$DPID" 2>/dev/null
	fi
	exec 7>&- 2>/dev/null
	[ -n "$SPID" ] && kill "$SPID" 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT

# wait_for CMD...: until it succeeds, 10 s at most (a wait, not a timing assertion)
wait_for() {
	i=0
	while ! "$@"; do
		i=$((i + 1))
		[ $i -ge 200 ] && return 1
		sleep 0.05
	done
	return 0
}

# same FILE WANT: cmp, through cat (cmp takes files of other sizes for different, and
# every file here says size 0, as tracefs's do)
same() { cat "$1" > "$W/got" && cmp -s "$W/got" "$2"; }

# lines FILE N: FILE holds at least N lines
lines_ge() { [ "$(wc -l < "$1")" -ge "$2" ]; }
trace_lines_ge() { [ "$(grep -vc '^#' "$M/trace")" -ge "$1" ]; }

[ -c /dev/fuse ] || skip "/dev/fuse is missing (no FUSE in this kernel or container)"
command -v fusermount3 >/dev/null || skip "fusermount3 not found (Debian package fuse3)"
command -v nm >/dev/null || skip "nm not found (Debian package binutils)"
command -v objdump >/dev/null || skip "objdump not found (Debian package binutils)"

# a copy of the sample of its own: enabling a probe on a file reaches every process of
# ours that maps it, and the tests that run beside this one have samples too
cp "$SAMPLE" "$W/sample" || fail "cp sample"
SAMPLE=$W/sample
if [ "$MODE" = command ]; then
	mkdir "$M"
	"$UPROBE" mount "$M" -- sh -c "
		echo 'p:grp/foo $W/sample:foo a=%di:s32' >> $M/uprobe_events || exit 10
		echo 1 > $M/events/grp/foo/enable || exit 11
		echo x | $W/sample > /dev/null || exit 12
		echo 0 > $M/events/grp/foo/enable
		grep -q 'foo: (0x[0-9a-f]*) a=4' $M/trace || { cat $M/trace; exit 13; }
		exit 7" > "$W/out" 2> "$W/daemon.err"
	st=$?
	[ $st -eq 7 ] || fail "uprobe mount -- sh exited $st, not the command's 7: $(cat "$W/out")"
	[ -e "$M/uprobe_events" ] && fail "still mounted after the command"
	"$UPROBE" mount "$M" -- sh -c 'kill -TERM $$'
	st=$?
	[ $st -eq 143 ] || fail "a command killed by SIGTERM: uprobe exited $st, not 143"
	ok "mount DIR -- COMMAND: the probe fired in a program it started; its status is uprobe's"
	cleanup
	exit 0
fi

if [ "$MODE" = reach_scope ]; then
	LIBC=$(awk '$6 ~ /\/libc\.so\.6$/ { print $6; exit }' /proc/$$/maps)
	[ -n "$LIBC" ] || skip "this shell maps no libc.so.6"
	cp "$(command -v sh)" "$W/upfsreach" || fail "cp sh"
	mkdir "$M"
	# the sibling: a shell of the same comm, mapping libc, not an ancestor of the mount
	"$W/upfsreach" -c 'while :; do sleep 0.05; done' &
	SIB=$!
	# the parent: starts the mount and waits for it, as a user's script would
	"$W/upfsreach" -c "echo \$\$ > $W/parent.pid; \"$UPROBE\" mount --all --comm upfsreach \"$M\" 2> \"$W/daemon.err\" & echo \$! > $W/daemon.pid; wait" &
	PARENT_SH=$!
	mounted2() { [ -e "$M/uprobe_events" ]; }
	wait_for mounted2 || { kill $SIB $PARENT_SH; skip "uprobe mount could not mount here: $(cat "$W/daemon.err")"; }
	DPID=$(cat "$W/daemon.pid")
	CPID=$SIB
	echo "p:grp/m $LIBC:malloc" > "$M/uprobe_events" || fail "p: refused: $(cat "$M/error_log")"
	t0=$(date +%s%N)
	echo 1 > "$M/events/grp/m/enable" || fail "enable 1"
	t1=$(date +%s%N)
	ms=$(( (t1 - t0) / 1000000 ))
	[ "$ms" -le 2000 ] || fail "enabling took $ms ms"
	for p in $$ $PPID "$(cat "$W/parent.pid")"; do
		grep -q "^TracerPid:[[:space:]]*0\$" /proc/$p/status ||
			fail "process $p ($(cat /proc/$p/comm)), an ancestor of the mount, was traced"
	done
	wait_for sh -c "grep -q '^TracerPid:[[:space:]]*$DPID\$' /proc/$SIB/status" ||
		fail "the sibling shell of comm upfsreach was not reached"
	echo 0 > "$M/events/grp/m/enable"
	fusermount3 -u "$M"
	wait_for sh -c "! kill -0 $DPID 2>/dev/null" || fail "the mount did not end"
	kill -0 $SIB 2>/dev/null || fail "the sibling died"
	grep -q "^TracerPid:[[:space:]]*0\$" /proc/$SIB/status || fail "the sibling is still traced"
	kill $SIB
	wait $PARENT_SH
	ok "enabling took $ms ms; no ancestor traced; the sibling of comm upfsreach reached and let go"
	cleanup
	exit 0
fi

# ---- the sample, reading a fifo, as the seed's 'ps -a | grep sample' process ----------
mkfifo "$W/in" || fail "mkfifo"
"$SAMPLE" < "$W/in" > "$W/sample.out" 2>&1 &
SPID=$!
exec 7> "$W/in"
PID=$SPID
# the shell's child has the fifo open; wait until it has exec'd the sample
for i in $(seq 500); do
	[ "$(readlink /proc/$PID/exe 2>/dev/null)" = "$(readlink -f "$SAMPLE")" ] && break
	sleep 0.01
done

# foo's address from `uprobe list`, the globals' from nm, as the seed says
FOO=$("$UPROBE" list "$SAMPLE" foo | awk '$4 == "foo" { print $1 }')
[ -n "$FOO" ] || fail "uprobe list $SAMPLE foo found nothing"
NMFOO=$(nm "$SAMPLE" | awk '$3 == "foo" { print $1 }')
[ "$((FOO))" -eq "$((0x$NMFOO))" ] || fail "uprobe list says foo is $FOO, nm says $NMFOO"
GSTR=$(nm "$SAMPLE" | awk '$3 == "global_str" { print $1 }')
GSTRP=$(nm "$SAMPLE" | awk '$3 == "global_str_p" { print $1 }')
[ -n "$GSTR" ] && [ -n "$GSTRP" ] || fail "nm finds no global_str/global_str_p"
FOO16=$(printf '0x%016x' "$FOO")	# the seed writes 0x0000000000400498
FOOX=$(printf '0x%x' "$FOO")		# and lists 0x400498

# ---- mount ------------------------------------------------------------------------------
mkdir "$M"
MOPTS=
[ "$MODE" = reach ] && MOPTS="--comm sample"
# shellcheck disable=SC2086
"$UPROBE" mount $MOPTS "$M" 2> "$W/daemon.err" &
DPID=$!
mounted() { [ -e "$M/uprobe_events" ] || ! kill -0 "$DPID" 2>/dev/null; }
wait_for mounted
if ! [ -e "$M/uprobe_events" ]; then
	reason=$(cat "$W/daemon.err")
	DPID=
	skip "uprobe mount could not mount here: $reason"
fi

# the bytes of SIZE at VADDR in the sample's file, as "47 6c ..." (objdump -h, od)
file_bytes() {
	off=$(objdump -h "$SAMPLE" | while read -r _i name size vma _lma foff _rest; do
		case $name in .*) ;; *) continue ;; esac
		case $size$vma$foff in *[!0-9a-f]* | '') continue ;; esac
		if [ $(($1)) -ge $((0x$vma)) ] && [ $(($1)) -lt $((0x$vma + 0x$size)) ]; then
			echo $(($1 - 0x$vma + 0x$foff))
			break
		fi
	done)
	[ -n "$off" ] || fail "address $1 is in no section of $SAMPLE"
	od -A n -t x1 -j "$off" -N "$2" "$SAMPLE" | tr -s ' \n' '  ' | sed 's/^ //; s/ $//'
}

# the FUNCTION column of the trace's record lines: "0x401126: S 0x7ff...: ..."
records() { grep -v '^#' "$M/trace" | sed 's/^.*\] *[0-9]*\.[0-9]*: : //'; }

SEED_RE='^ *[^ ]+-[0-9]+ +\[[0-9]{3}\] +[0-9]+\.[0-9]{6}: : 0x[0-9a-f]+: [SDA] '

# until the sample has read what was just written to it and sleeps in its next read
wait_consumed() { # RCHAR-BEFORE
	i=0
	while [ $i -lt 200 ]; do
		now=$(awk '/^rchar/{print $2}' /proc/$PID/io)
		st=$(awk '/^State/{print $2}' /proc/$PID/status)
		[ "$now" -gt "$1" ] && [ "$st" = S ] && break
		sleep 0.02
		i=$((i + 1))
	done
	sleep 0.05
}
rchar() { awk '/^rchar/{print $2}' /proc/$PID/io; }

case $MODE in
seed)
	# --- as the seed: "Now set a probe at function foo() ..." ---
	echo "up $PID $FOO16 S 100" > "$M/uprobes_events" || fail "S line refused"
	echo "up $PID $FOO16 D $(printf '%016x' 0x$GSTR) 15" >> "$M/uprobes_events" || fail "D line refused"
	echo "up $PID $FOO16 D $(printf '%016x' 0x$GSTRP) 8" >> "$M/uprobes_events" || fail "D line refused"
	echo "up $PID $FOO16 A 5" >> "$M/uprobes_events" || fail "A line refused"
	cat "$M/uprobe_events" > "$W/listing"
	printf 'up %d %s S 100\nup %d %s D 0x%x 15\nup %d %s D 0x%x 8\nup %d %s A 5\n' \
		"$PID" "$FOOX" "$PID" "$FOOX" 0x$GSTR "$PID" "$FOOX" 0x$GSTRP "$PID" "$FOOX" \
		> "$W/listing.want"
	cmp -s "$W/listing" "$W/listing.want" ||
		fail "cat uprobe_events: $(cat "$W/listing") -- want the seed's: $(cat "$W/listing.want")"
	same "$M/uprobes_events" "$W/listing.want" || fail "uprobes_events lists otherwise"
	ok "cat uprobe_events is the seed's listing"
	grep -q "^TracerPid:[[:space:]]*$DPID\$" /proc/$PID/status || fail "the sample is not traced by the daemon"
	echo 1 > "$M/tracing_on" || fail "echo 1 > tracing_on"

	printf 'ab' >&7
	wait_for trace_lines_ge 42 || fail "two hits did not give 42 lines: $(cat "$M/trace")"
	cat "$M/trace" > "$W/trace"
	head -4 "$W/trace" > "$W/header"
	printf '%s\n' '# tracer: nop' '#' \
		'#           TASK-PID    CPU#    TIMESTAMP  FUNCTION' \
		'#              | |       |          |         |' > "$W/header.want"
	cmp -s "$W/header" "$W/header.want" || fail "trace header: $(cat "$W/header")"
	n=$(grep -vc '^#' "$W/trace")
	[ "$n" -eq 42 ] || fail "$n lines, want 2 hits x (13 S + 3 D + 5 A)"
	bad=$(grep -v '^#' "$W/trace" | grep -Evc "$SEED_RE")
	[ "$bad" -eq 0 ] || fail "$bad lines not in the seed's format: $(grep -v '^#' "$W/trace" | grep -Ev "$SEED_RE" | head -2)"
	[ "$(grep -v '^#' "$W/trace" | grep -Evc -- "-$PID ")" -eq 0 ] || fail "lines of another pid"
	records > "$W/rec"
	[ "$(grep -vc "^$FOOX: " "$W/rec")" -eq 0 ] || fail "a line does not name foo, $FOOX"
	kinds=$(sed 's/^[^ ]* \(.\).*/\1/' "$W/rec" | tr -d '\n')
	hit=SSSSSSSSSSSSSDDDAAAAA
	[ "$kinds" = "$hit$hit" ] || fail "line types $kinds, want $hit twice"
	# A: exactly the seed's five lines, each hit
	grep ": A " "$W/rec" > "$W/a"
	for h in 1 2; do
		for l in "ARG 1: 0000000000000004" "ARG 2: 00000000000000c8" \
			"ARG 3: 00000000ff0000ed" "ARG 4: ffffffffffffffff" "ARG 5: 0000000000000048"; do
			echo "$FOOX: A $l"
		done
	done > "$W/a.want"
	cmp -s "$W/a" "$W/a.want" || fail "A lines: $(cat "$W/a")"
	ok "A lines are the seed's"
	# D of global_str: 15 bytes, 8 a line, as the seed prints them; the variable's own
	# bytes (nm -S: 14) are the file's .data, the 15th is past it (.bss here: 0)
	gsize=$(nm -S "$SAMPLE" | awk '$4 == "global_str" { print $2 }')
	[ -n "$gsize" ] || fail "nm -S gives no size for global_str"
	n=$((0x$gsize < 15 ? 0x$gsize : 15))
	want=$(file_bytes 0x$GSTR $n)
	a1=$(printf %x 0x$GSTR)
	a2=$(printf %x $((0x$GSTR + 8)))
	grep -E ": D 0x($a1|$a2): " "$W/rec" | head -2 > "$W/d"
	got=$(sed 's/^[^:]*: D [^:]*: //' "$W/d" | cut -c 1-24 | tr -s ' \n' '  ' | cut -d' ' -f1-$n)
	[ "$got" = "$want" ] || fail "D of global_str: $got, the file has $want"
	grep -q ": D 0x$a1: .*  Global S\$" "$W/d" || fail "D line 1: $(head -1 "$W/d")"
	grep -Eq ": D 0x$a2: ([0-9a-f]{2} ){7}    tring\.\.\$" "$W/d" || fail "D line 2: $(tail -1 "$W/d")"
	[ "$(grep -c "Global S\$" "$W/rec")" -eq 2 ] || fail "global_str not dumped in each hit"
	ok "D lines of global_str: $(cat "$W/d" | tr '\n' '|')"
	# S: 100 bytes from the stack in 13 lines; the sample's string is on it
	[ "$(grep ': S ' "$W/rec" | grep -c 'This str$')" -eq 2 ] || fail "S: no 'This str' on the stack"
	# D of global_str_p: 8 bytes, the address of the string literal
	ptr=$(grep ": D 0x$(printf %x 0x$GSTRP): " "$W/rec" | head -1 |
		awk '{ for (i = 8; i >= 1; i--) printf "%s", $(i + 3); print "" }')
	[ -n "$ptr" ] || fail "no D line of global_str_p"
	lit=$(file_bytes 0x$ptr 21)
	[ "$lit" = "$(printf 'Global String pointer' | od -A n -t x1 | tr -s ' \n' '  ' | sed 's/^ //; s/ $//')" ] ||
		fail "global_str_p holds 0x$ptr, where the file has $lit, not \"Global String pointer\""
	ok "D of global_str_p: 0x$ptr, the literal"

	# --- "we have not used '>>' here; ... all existing probes will be cleared" ---
	echo "up $PID $FOO16 D $(printf '0x%016x' 0x$ptr) 24" > "$M/uprobes_events" || fail "> refused"
	printf 'up %d %s D 0x%x 24\n' "$PID" "$FOOX" 0x$ptr > "$W/listing.want"
	same "$M/uprobe_events" "$W/listing.want" || fail "after >: $(cat "$M/uprobe_events")"
	[ "$(grep -vc '^#' "$M/trace")" -eq 0 ] || fail "removing the probes did not reset trace"
	printf 'c' >&7
	wait_for trace_lines_ge 3 || fail "the new probe gave no lines"
	records > "$W/rec"
	sed 's/^.*  //' "$W/rec" > "$W/ascii"
	printf '%s\n' "Global S" "tring po" "inter..." > "$W/ascii.want"
	cmp -s "$W/ascii" "$W/ascii.want" || fail "D 24 of the literal: $(cat "$W/rec")"
	head -2 "$W/rec" | cut -d' ' -f4-11 > "$W/hex"
	printf '%s\n' "47 6c 6f 62 61 6c 20 53" "74 72 69 6e 67 20 70 6f" > "$W/hex.want"
	cmp -s "$W/hex" "$W/hex.want" || fail "D 24 bytes: $(cat "$W/hex")"
	ok "'>' cleared the probes; the seed's three D lines of the literal"

	# --- "To clear all the probe events" ---
	echo > "$M/uprobes_events" || fail "echo > uprobes_events"
	[ -z "$(cat "$M/uprobe_events")" ] || fail "probes left: $(cat "$M/uprobe_events")"
	printf 'd' >&7
	ok "echo > uprobes_events: no probe left"
	;;

remove)
	echo "up $PID $FOOX A 1" > "$M/uprobe_events" || fail "seed line"
	echo "p:grp/ev1 $SAMPLE:foo a=%di:s32" >> "$M/uprobe_events" || fail "p:grp/ev1"
	echo "p:grp/ev2 $SAMPLE:foo" >> "$M/uprobe_events" || fail "p:grp/ev2"
	[ -d "$M/events/grp/ev1" ] || fail "no events/grp/ev1"
	echo "-:grp/ev1" >> "$M/uprobe_events" || fail "-:grp/ev1 refused"
	printf 'up %d %s A 1\np:grp/ev2 %s:foo\n' "$PID" "$FOOX" "$SAMPLE" > "$W/want"
	same "$M/uprobe_events" "$W/want" || fail "after -:grp/ev1: $(cat "$M/uprobe_events")"
	[ -e "$M/events/grp/ev1" ] && fail "events/grp/ev1 still there"
	[ -d "$M/events/grp/ev2" ] || fail "events/grp/ev2 went too"
	if echo "-:grp/nosuch" >> "$M/uprobe_events" 2> /dev/null; then fail "-: of a missing event succeeded"; fi
	echo "-:ev2" >> "$M/uprobe_events" || fail "-:EVENT without a group refused"
	[ -e "$M/events/grp" ] && fail "events/grp still there with no event"
	printf 'up %d %s A 1\n' "$PID" "$FOOX" > "$W/want"
	same "$M/uprobe_events" "$W/want" || fail "after -:ev2: $(cat "$M/uprobe_events")"
	printf 'a' >&7
	wait_for trace_lines_ge 1 || fail "the seed probe left fires no more"
	ok "-: removes one probe"
	;;

error_log)
	echo "up $PID $FOOX A 2" > "$M/uprobe_events" || fail "good line refused"
	bad="up $PID $FOOX Q 5"
	if echo "$bad" >> "$M/uprobe_events" 2> /dev/null; then fail "a bad line was accepted"; fi
	# dash's echo says "I/O error" whatever the errno: coreutils' names it
	if [ -x /bin/echo ]; then
		/bin/echo "$bad" >> "$M/uprobe_events" 2> "$W/echo.err"
		grep -q "Invalid argument" "$W/echo.err" || fail "the write did not fail with EINVAL: $(cat "$W/echo.err")"
	fi
	cat "$M/error_log" > "$W/log"
	grep -Eq '^\[ *[0-9]+\.[0-9]{6}\] trace_uprobe: error: Invalid dump type' "$W/log" ||
		fail "error_log: $(cat "$W/log")"
	grep -qx "  Command: $bad" "$W/log" || fail "error_log has not the command: $(cat "$W/log")"
	# the caret under Q: "  Command: " is 11 columns
	col=$(awk -v s="$bad" 'BEGIN { print index(s, " Q ") + 12 }')
	caret=$(awk '/^  Command: /{ getline; print; exit }' "$W/log")
	[ "$(printf '%s' "$caret" | awk '{ print index($0, "^") }')" -eq "$col" ] ||
		fail "the caret is not under Q: '$caret' (want column $col)"
	printf 'up %d %s A 2\n' "$PID" "$FOOX" > "$W/want"
	same "$M/uprobe_events" "$W/want" || fail "probes changed: $(cat "$M/uprobe_events")"
	ok "bad line: EINVAL, error_log: $(grep error: "$W/log")"
	if echo "p:g/e $SAMPLE:no_such_function" >> "$M/uprobe_events" 2> /dev/null; then
		fail "an unknown symbol was accepted"
	fi
	grep -q "no function 'no_such_function'" "$M/error_log" || fail "error_log: $(cat "$M/error_log")"
	if echo "up 4194304 $FOOX A 1" >> "$M/uprobe_events" 2> /dev/null; then fail "a missing pid was accepted"; fi
	echo > "$M/error_log"
	[ -z "$(cat "$M/error_log")" ] || fail "echo > error_log did not clear it"
	ok "error_log cleared"
	;;

pipe)
	echo "up $PID $FOOX A 2" > "$M/uprobe_events" || fail "A line refused"
	: > "$W/pipe"
	cat "$M/trace_pipe" > "$W/pipe" &
	CPID=$!
	printf 'a' >&7
	wait_for lines_ge "$W/pipe" 2 || fail "trace_pipe returned nothing"
	kill -0 $CPID 2>/dev/null || fail "cat trace_pipe ended: it should block"
	printf 'b' >&7
	wait_for lines_ge "$W/pipe" 4 || fail "trace_pipe did not return the second hit"
	grep -Evc "$SEED_RE" "$W/pipe" | grep -qx 0 || fail "trace_pipe lines: $(cat "$W/pipe")"
	[ "$(grep -c "A ARG 1: 0000000000000004" "$W/pipe")" -eq 2 ] || fail "trace_pipe: $(cat "$W/pipe")"
	[ "$(grep -vc '^#' "$M/trace")" -eq 0 ] || fail "trace_pipe did not consume: $(cat "$M/trace")"
	kill -TERM $CPID	# (background jobs of sh ignore SIGINT)
	wait $CPID
	CPID=
	ok "trace_pipe: blocking, as they come, consumed; the reader interrupted"
	;;

tracing_on)
	echo "up $PID $FOOX A 1" > "$M/uprobe_events" || fail "A line refused"
	[ "$(cat "$M/tracing_on")" = 1 ] || fail "tracing_on is not 1 at first"
	echo 0 > "$M/tracing_on"
	[ "$(cat "$M/tracing_on")" = 0 ] || fail "tracing_on does not read 0"
	before=$(rchar)
	printf 'a' >&7
	wait_consumed "$before" # 'a' hit foo, off
	echo 1 > "$M/tracing_on"
	printf 'b' >&7
	wait_for trace_lines_ge 1 || fail "nothing recorded with tracing_on 1"
	# the fifo is in order: 'a' was handled (while off) before 'b' made its line
	[ "$(grep -vc '^#' "$M/trace")" -eq 1 ] || fail "a hit was recorded while off: $(cat "$M/trace")"
	if echo x > "$M/tracing_on" 2> /dev/null; then fail "tracing_on took 'x'"; fi
	ok "tracing_on 0 records nothing"
	;;

event)
	echo "$PID" > "$M/set_event_pid" || fail "set_event_pid refused $PID"
	[ "$(cat "$M/set_event_pid")" = "$PID" ] || fail "set_event_pid reads $(cat "$M/set_event_pid")"
	spec="p:grp/foo $SAMPLE:foo a=%di:s32 b=%si:u32 e=%r8:s8"
	echo "$spec" > "$M/uprobe_events" || fail "p: spec refused: $(cat "$M/error_log")"
	[ "$(cat "$M/uprobe_events")" = "$spec" ] || fail "listing: $(cat "$M/uprobe_events")"
	# the kernel makes an event disabled: its hits are not recorded until enabled
	[ "$(cat "$M/events/grp/foo/enable")" = 0 ] || fail "a new event's enable is not 0"
	before=$(rchar)
	printf 'z' >&7
	wait_consumed "$before"
	[ "$(grep -vc '^#' "$M/trace")" -eq 0 ] || fail "a disabled new event recorded: $(cat "$M/trace")"
	echo 1 > "$M/events/grp/foo/enable" || fail "enable 1"
	if echo "-:grp/foo" >> "$M/uprobe_events" 2>/dev/null; then fail "-: removed an enabled event"; fi
	if echo > "$M/uprobe_events" 2>/dev/null; then fail "> uprobe_events removed an enabled event"; fi
	[ "$(cat "$M/uprobe_events")" = "$spec" ] || fail "the enabled event went: $(cat "$M/uprobe_events")"
	ok "created disabled; an enabled event cannot be removed (EBUSY)"
	printf 'a' >&7
	wait_for trace_lines_ge 1 || fail "the p: probe recorded nothing"
	grep -q '^#           TASK-PID     CPU#     TIMESTAMP  FUNCTION$' "$M/trace" || fail "event header: $(head -4 "$M/trace")"
	grep -v '^#' "$M/trace" > "$W/ev"
	grep -Eq "^ *sample-$PID +\[[0-9]{3}\] +[0-9]+\.[0-9]{6}: foo: \($FOOX\) a=4 b=200 e=72\$" "$W/ev" ||
		fail "event line: $(cat "$W/ev")"
	ok "p: through the mount: $(cat "$W/ev")"
	echo 0 > "$M/events/grp/foo/enable"
	before=$(rchar)
	printf 'b' >&7
	wait_consumed "$before" # 'b' hit foo, disabled
	echo 1 > "$M/events/grp/foo/enable"
	printf 'c' >&7
	wait_for trace_lines_ge 2 || fail "no line after enable 1"
	[ "$(grep -vc '^#' "$M/trace")" -eq 2 ] || fail "a hit recorded while disabled"
	awk '$2 == "foo" { print $3 }' "$M/uprobe_profile" > "$W/hits"
	[ "$(cat "$W/hits")" = 2 ] || fail "uprobe_profile: $(cat "$M/uprobe_profile")"
	ok "enable 0/1, uprobe_profile: $(cat "$M/uprobe_profile")"
	[ "$(cat "$M/events/grp/foo/filter")" = none ] || fail "filter reads $(cat "$M/events/grp/foo/filter")"
	F=$M/events/grp/foo/filter
	echo 'a == 5 && b > 100' > "$F" || fail "filter 'a == 5 && b > 100' refused: $(cat "$M/error_log")"
	[ "$(cat "$F")" = 'a == 5 && b > 100' ] || fail "filter reads $(cat "$F")"
	before=$(rchar)
	printf 'd' >&7
	wait_consumed "$before" # a is 4: filtered out
	echo 'a == 4 && b > 100' > "$F" || fail "filter 'a == 4 && b > 100' refused"
	printf 'e' >&7
	wait_for trace_lines_ge 3 || fail "no line with a filter that holds"
	[ "$(grep -vc '^#' "$M/trace")" -eq 3 ] || fail "a hit the filter rejects was recorded: $(cat "$M/trace")"
	echo 'comm == "ls" && a == 4' > "$F" || fail "filter with comm refused: $(cat "$M/error_log")"
	before=$(rchar)
	printf 'f' >&7
	wait_consumed "$before" # the sample is not ls
	echo 'a == 4 && comm ~ "sam*"' > "$F" || fail "filter with comm ~ refused: $(cat "$M/error_log")"
	printf 'g' >&7
	wait_for trace_lines_ge 4 || fail "no line with comm ~ \"sam*\""
	[ "$(grep -vc '^#' "$M/trace")" -eq 4 ] || fail "comm == \"ls\" let a hit of sample through: $(cat "$M/trace")"
	: > "$M/error_log"
	if echo 'nosuch == 1' > "$F" 2> /dev/null; then fail "a filter on no argument was taken"; fi
	grep -q "error: " "$M/error_log" || fail "error_log: $(cat "$M/error_log")"
	[ "$(cat "$F")" = 'a == 4 && comm ~ "sam*"' ] || fail "a refused filter changed the filter: $(cat "$F")"
	echo 0 > "$F" || fail "filter 0 refused"
	[ "$(cat "$F")" = none ] || fail "filter 0 left $(cat "$F")"
	ok "filter: kept only the hits it holds on; 0 removes it; $(grep error: "$M/error_log" | sed 's/^\[[^]]*\] //')"
	;;

hist)
	echo "$PID" > "$M/set_event_pid" || fail "set_event_pid refused $PID"
	echo "p:grp/foo $SAMPLE:foo a=%di:s32 e=%r8:s8" > "$M/uprobe_events" ||
		fail "p: spec refused: $(cat "$M/error_log")"
	echo 1 > "$M/events/grp/foo/enable" || fail "enable 1"
	T=$M/events/grp/foo/trigger
	[ "$(cat "$T")" = "$(printf '# Available triggers:\n# hist')" ] || fail "trigger reads $(cat "$T")"
	[ -z "$(cat "$M/events/grp/foo/hist")" ] || fail "hist without a trigger: $(cat "$M/events/grp/foo/hist")"
	echo 'hist:keys=a,e:sort=a' > "$T" || fail "hist trigger refused: $(cat "$M/error_log")"
	want='hist:keys=a,e:vals=hitcount:sort=a:size=2048 [active]'
	[ "$(cat "$T")" = "$want" ] || fail "trigger reads '$(cat "$T")', not '$want'"
	printf 'abc' >&7
	hist_has() { grep -q "hitcount: *$1\$" "$M/events/grp/foo/hist"; }
	wait_for hist_has 3 || fail "hist: $(cat "$M/events/grp/foo/hist")"
	grep -Eq '^\{ a: +4, e: +72 \} hitcount: +3$' "$M/events/grp/foo/hist" ||
		fail "the entry: $(cat "$M/events/grp/foo/hist")"
	grep -qF "# trigger info: $want" "$M/events/grp/foo/hist" || fail "no trigger info: $(cat "$M/events/grp/foo/hist")"
	grep -q '^    Hits: 3$' "$M/events/grp/foo/hist" || fail "Totals: $(cat "$M/events/grp/foo/hist")"
	ok "hist: $(grep '} hitcount' "$M/events/grp/foo/hist")"
	# a second trigger on the event, and a bad one: refused, said in error_log
	if echo 'hist:keys=e' >> "$T" 2>/dev/null; then fail "a second trigger was taken"; fi
	: > "$M/error_log"
	if echo 'hist:keys=nosuch' > "$M/events/grp/foo/trigger" 2>/dev/null; then
		fail "a trigger on no field was taken"
	fi
	grep -q "hist:grp:foo: error: " "$M/error_log" || fail "error_log: $(cat "$M/error_log")"
	grep -q "Command: hist:keys=nosuch" "$M/error_log" || fail "error_log: $(cat "$M/error_log")"
	grep -q '^ *\^' "$M/error_log" || fail "no caret: $(cat "$M/error_log")"
	ok "refused: $(grep error: "$M/error_log" | sed 's/^\[[^]]*\] //')"
	# the trigger goes: its table with it; the event traces again
	if echo '!hist:keys=e' >> "$T" 2>/dev/null; then fail "removed a trigger that is not there"; fi
	echo '!hist:keys=a,e:sort=a' >> "$T" || fail "the trigger could not be removed"
	[ "$(cat "$T")" = "$(printf '# Available triggers:\n# hist')" ] || fail "after removal: $(cat "$T")"
	[ -z "$(cat "$M/events/grp/foo/hist")" ] || fail "a table after removal"
	printf 'd' >&7
	wait_for trace_lines_ge 1 || fail "no line after the trigger went"
	ok "removed: the event prints again"
	;;

reach)
	echo "p:grp/foo $SAMPLE:foo a=%di:s32" > "$M/uprobe_events" || fail "p: refused: $(cat "$M/error_log")"
	grep -q "^TracerPid:[[:space:]]*0\$" /proc/$PID/status || fail "traced before the event is enabled"
	echo 1 > "$M/events/grp/foo/enable" || fail "enable 1"
	grep -q "^TracerPid:[[:space:]]*$DPID\$" /proc/$PID/status || fail "enabling did not bring the sample in"
	printf 'a' >&7
	wait_for trace_lines_ge 1 || fail "no hit recorded"
	grep -Eq "foo: \($FOOX\) a=4\$" "$M/trace" || fail "trace: $(cat "$M/trace")"
	grep -q "^TracerPid:[[:space:]]*0\$" /proc/$$/status || fail "the test's shell was reached"
	ok "enabling reached the process mapping the file: $(grep -v '^#' "$M/trace")"
	;;

reach_none)
	echo "p:grp/foo $SAMPLE:foo a=%di:s32" > "$M/uprobe_events" || fail "p: refused: $(cat "$M/error_log")"
	echo 1 > "$M/events/grp/foo/enable" || fail "enable 1"
	sleep 0.3
	grep -q "^TracerPid:[[:space:]]*0\$" /proc/$PID/status ||
		fail "enabling brought in the sample without --all/--uid/--comm"
	ok "enabling reached nothing that was not asked for"
	;;

oracle)
	K=/sys/kernel/tracing
	[ -w "$K/uprobe_events" ] || mount -t tracefs nodev "$K" 2>/dev/null
	[ -w "$K/uprobe_events" ] || skip "no uprobe events in this kernel's tracefs"
	G=upfs$$
	OFF=$(objdump -h "$SAMPLE" | awk '$2 == ".text" { print $6 }')
	L="p:$G/ev $SAMPLE:0x$OFF a=%di:u32 s=+0(%si):string"
	kclean() { echo "-:$G/ev" >> "$K/uprobe_events" 2>/dev/null; }
	echo "$L" >> "$K/uprobe_events" || skip "the kernel refused $L"
	echo "$L" >> "$M/uprobe_events" || { kclean; fail "the mount refused $L: $(cat "$M/error_log")"; }
	for f in uprobe_events dynamic_events events/$G/ev/enable events/$G/enable; do
		grep -v '^#' "$K/$f" | grep -F "$G" > "$W/k" 2>/dev/null || cat "$K/$f" > "$W/k"
		grep -v '^#' "$M/$f" | grep -F "$G" > "$W/m" 2>/dev/null || cat "$M/$f" > "$W/m"
		cmp -s "$W/k" "$W/m" || { kclean; fail "$f: kernel '$(cat "$W/k")', mount '$(cat "$W/m")'"; }
	done
	grep -v '^ID:' "$K/events/$G/ev/format" > "$W/k"
	grep -v '^ID:' "$M/events/$G/ev/format" > "$W/m"
	cmp -s "$W/k" "$W/m" || { kclean; fail "format: $(diff "$W/k" "$W/m")"; }
	grep -F " ev " "$K/uprobe_profile" | tr -s ' ' > "$W/k"
	grep -F " ev " "$M/uprobe_profile" | tr -s ' ' > "$W/m"
	cmp -s "$W/k" "$W/m" || { kclean; fail "uprobe_profile: kernel '$(cat "$W/k")', mount '$(cat "$W/m")'"; }
	kclean
	for bad in "p:$G/b /nonexistent:0x10" "p:$G/b /sys:0x10" "p:$G/b $SAMPLE:0x1z" \
		"p:$G/b $SAMPLE:0x10(0x1" "p:$G/b $SAMPLE:0x10 @+0xzz"; do
		for d in "$K" "$M"; do
			echo > "$d/error_log"
			printf '%s' "$bad" >> "$d/uprobe_events" 2>/dev/null && { kclean; fail "$d took '$bad'"; }
			sed 's/^\[[^]]*\] //' "$d/error_log" > "$W/log.$(basename "$d")"
		done
		cmp -s "$W/log.tracing" "$W/log.mnt" || fail "error_log of '$bad': kernel '$(cat "$W/log.tracing")', mount '$(cat "$W/log.mnt")'"
	done
	ok "the kernel and the mount agree: listing, enable, format, profile, error_log"
	;;

hang_pid)
	# (timeout -s KILL: a writer stuck in the request ignores every other signal)
	timeout -s KILL 10 sh -c "echo \$\$ > $M/set_event_pid; grep TracerPid /proc/\$\$/status" > "$W/out" ||
		fail "the write to set_event_pid hung (or failed): $(cat "$W/out")"
	grep -q "^TracerPid:[[:space:]]*$DPID\$" "$W/out" || fail "the writer is not traced: $(cat "$W/out")"
	ok "echo \$\$ > set_event_pid returned; the shell was traced: $(cat "$W/out")"
	;;

hang_write)
	SH=$(readlink -f /bin/sh)
	OFF=$(awk '$2 ~ /x/ && $6 == "'"$SH"'" { print $3; exit }' /proc/self/maps)
	[ -z "$OFF" ] && OFF=$(sh -c 'cat /proc/$$/maps' | awk '$2 ~ /x/ && $6 == "'"$SH"'" { print $3; exit }')
	[ -n "$OFF" ] || fail "no executable mapping of $SH"
	timeout -s KILL 10 sh -c "echo \$\$ > $M/set_event_pid &&
		echo 'p:grp/sh $SH:0x$OFF' >> $M/uprobe_events && cat $M/uprobe_events" > "$W/out" ||
		fail "a traced writer of uprobe_events hung (or failed): $(cat "$W/out"; cat "$M/error_log")"
	grep -q "^p:grp/sh $SH:0x0*$OFF\$" "$W/out" || fail "listing: $(cat "$W/out")"
	ok "a traced shell placed a probe on its own program: $(cat "$W/out")"
	LIBC=$(awk '$6 ~ /\/libc[.-]/ { print $6; exit }' /proc/$PID/maps)
	[ -n "$LIBC" ] || fail "the sample maps no libc"
	sh -c "echo \$\$ > $M/set_event_pid; exec cat $M/trace_pipe" > /dev/null 2>&1 &
	CPID=$!
	wait_for grep -q "^TracerPid:[[:space:]]*$DPID\$" /proc/$CPID/status || fail "cat is not traced"
	timeout -s KILL 10 sh -c "echo 'p:grp/gp $LIBC:getpid' >> $M/uprobe_events" ||
		fail "placing a probe in a process blocked in trace_pipe hung"
	timeout -s KILL 10 cat "$M/uprobe_events" > "$W/out" || fail "the mount hangs after it"
	grep -q "grp/gp" "$W/out" || fail "listing: $(cat "$W/out")"
	ok "a probe placed in a process blocked in trace_pipe"
	;;

unmount|sigterm)
	echo "up $PID $FOOX A 1" > "$M/uprobe_events" || fail "A line refused"
	printf 'a' >&7
	wait_for trace_lines_ge 1 || fail "no line"
	grep -q "^TracerPid:[[:space:]]*$DPID\$" /proc/$PID/status || fail "not traced by the daemon"
	if [ "$MODE" = unmount ]; then
		fusermount3 -u "$M" || fail "fusermount3 -u failed"
	else
		kill -TERM "$DPID"
	fi
	wait "$DPID"
	st=$?
	DPID=
	[ "$st" -eq 0 ] || fail "the daemon exited $st"
	[ -e "$M/uprobe_events" ] && fail "still mounted"
	grep -q "^TracerPid:[[:space:]]*0\$" /proc/$PID/status || fail "still traced: $(grep TracerPid /proc/$PID/status)"
	printf 'bcd' >&7
	exec 7>&-
	wait "$SPID"
	st=$?
	SPID=
	[ "$st" -eq 0 ] || fail "the sample exited $st after the unmount"
	ok "$MODE: probes removed, the sample ran on and exited 0"
	;;

*)
	fail "unknown mode $MODE"
	;;
esac
cleanup
exit 0
