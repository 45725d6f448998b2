#!/bin/sh
# SPDX-License-Identifier: MIT
# usage: trace_midinsn.sh UPROBE SAMPLE
# A probe one byte into an instruction of the sample's foo (the first instruction longer
# than one byte, as `uprobe decode` lists it) must be refused: exit 2 (no probe could be armed), and the message
# names that instruction.  Both the absolute (0xVADDR) and the seed form are tried.
uprobe=$1
sample=$2
line=$("$uprobe" decode --asm "$sample" foo | awk '$2 > 1 { print; exit }')
[ -n "$line" ] || { echo "FAIL: no instruction longer than a byte in foo"; exit 1; }
addr=$(printf '0x%x' $(($(echo "$line" | cut -d' ' -f1) + 1)))
insn=$(printf '%s\n' "$line" | cut -f2)
echo "instruction: $line; probing $addr, inside '$insn'"
status=0
for spec in "p $addr" "up 0 $addr A 1" "p $sample:foo+$(($addr - 0x$(nm "$sample" | awk '$3 == "foo" { print $1 }')))"; do
	out=$(timeout 15 "$uprobe" trace -e "$spec" -- "$sample" </dev/null 2>&1)
	rc=$?
	printf '$ uprobe trace -e "%s" -- %s\n%s\n[exit %s]\n' "$spec" "$sample" "$out" "$rc"
	if [ $rc != 2 ]; then
		echo "FAIL: exit status $rc, expected 2"
		status=1
	fi
	if ! printf '%s\n' "$out" | grep -qF "$insn"; then
		echo "FAIL: the message does not name the instruction '$insn'"
		status=1
	fi
	if ! printf '%s\n' "$out" | grep -q "not an instruction boundary"; then
		echo "FAIL: the message does not say it is not an instruction boundary"
		status=1
	fi
done
[ $status = 0 ] && echo PASS
exit $status
