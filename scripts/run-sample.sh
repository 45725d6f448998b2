#!/bin/sh
# SPDX-License-Identifier: MIT
# usage: scripts/run-sample.sh BUILD
# `make run`: shows the seed's sample program (tests/targets/sample.c) as uprobe sees it.
# Until the tracer exists this lists the sample's probeable functions and shows how a
# probe on each instruction of foo() and main() would be executed; later it will trace
# the sample as seed 008 does.
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

cat <<BANNER
== uprobe $("$uprobe" --version | cut -d' ' -f2): the seed's sample program ==
   $sample  (tests/targets/sample.c: foo(a, b, c, d, e) is called per line of input)
   The tracer is not there yet: this shows where probes would go and how each
   instruction would be run when probed (emulate, xol, step or reject).

BANNER

echo "\$ uprobe list $sample 'foo'; uprobe list $sample 'main'"
echo "# vaddr     file-offset  size  name"
"$uprobe" list "$sample" foo
"$uprobe" list "$sample" main
for sym in foo main; do
	echo
	echo "\$ uprobe decode --asm $sample $sym"
	echo "# vaddr     length  plan  reason  instruction"
	"$uprobe" decode --asm "$sample" "$sym"
done
echo
echo "\$ uprobe decode --summary $sample"
"$uprobe" decode --summary "$sample"
