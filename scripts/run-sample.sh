#!/bin/sh
# SPDX-License-Identifier: MIT
# usage: scripts/run-sample.sh BUILD
# `make run`: traces the seed's sample program (tests/targets/sample.c) the way seed 008's
# documentation does: find foo and the globals with nm, then one probe on foo that dumps
# the stack, two that dump the globals and one that prints foo's five arguments.  The
# sample calls foo once per character of input: it is fed "ab", so foo is hit twice.
set -e
build=${1:-build}
uprobe="$build/uprobe"
sample="$build/tests/targets/sample"

for f in "$uprobe" "$sample"; do
	if [ ! -x "$f" ]; then
		echo "run-sample: $f is missing; build first (make)" >&2
		exit 1
	fi
done
say() { printf '\n# %s\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }

cat <<BANNER
== uprobe $("$uprobe" --version | cut -d' ' -f2): seed 008's example, traced ==
   $sample  (tests/targets/sample.c: foo(a, b, c, d, e) is called per input character)
BANNER

say "1. Where is foo?  (the seed: nm sample | grep foo)"
run "$uprobe" list "$sample" foo
foo=0x$(nm "$sample" | awk '$3 == "foo" { print $1 }')
say "2. Where are the globals?  (the seed: nm sample | grep global)"
printf '$ nm %s | grep global_str\n' "$sample"
nm "$sample" | grep ' global_str'
gs=$(nm "$sample" | awk '$3 == "global_str" { print $1 }')
gp=$(nm "$sample" | awk '$3 == "global_str_p" { print $1 }')

say "3. The seed's four probes on foo, PID 0 meaning the command after --; \"ab\" on stdin"
printf '$ printf ab | %s trace \\\n' "$uprobe"
printf "    -e 'up 0 %s S 100' \\\\\n" "$foo"
printf "    -e 'up 0 %s D %s 15' \\\\\n" "$foo" "$gs"
printf "    -e 'up 0 %s D %s 8' \\\\\n" "$foo" "$gp"
printf "    -e 'up 0 %s A 5' -- %s\n" "$foo" "$sample"
printf ab | "$uprobe" trace -e "up 0 $foo S 100" -e "up 0 $foo D $gs 15" \
	-e "up 0 $foo D $gp 8" -e "up 0 $foo A 5" -- "$sample"

cat <<'NOTE'

# S: 100 bytes of stack: foo's return address into main, then main's locals
#    (the string, e, d, c, b, a); D: global_str, then global_str_p, which holds the
#    address of the "Global String pointer" literal; A: foo's five arguments,
#    4, 200, 0xff0000ed, -1 and 'H' (0x48), exactly as in the seed.
NOTE

say "4. The same probe in the kernel's uprobe_events form, with named arguments"
spec="p:sample/foo $sample:foo a=%di:s32 b=%si:u32 c=%dx:x64 d=%cx:s64 e=%r8:u8"
printf "\$ printf x | %s trace -e '%s' -- %s\n" "$uprobe" "$spec" "$sample"
printf x | "$uprobe" trace -e "$spec" -- "$sample"
