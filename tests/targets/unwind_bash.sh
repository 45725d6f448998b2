# SPDX-License-Identifier: MIT
# bash's own work for tests/integration/unwind_gdb.py: functions, an associative array,
# expansions and builtins, in one process (no subshell, no command run: gdb follows
# none), so that its mallocs are the same under gdb and under uprobe.
f() { local a=$1; echo "${a//o/0}"; }
declare -A m
for i in 1 2 3 4 5 6 7 8 9 10; do
	x="item $i"; m[$x]=$((i * i)); f "$x foo"
done
s=""; for k in "${!m[@]}"; do s+="$k=${m[$k]} "; done
printf '%s\n' "${#s}"
