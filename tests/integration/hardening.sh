#!/bin/sh
# SPDX-License-Identifier: MIT
# usage: hardening.sh UPROBE AGENT_OBJ AGENT_ELF FORTIFY(ON|OFF)
#
# The tracer runs as root on other users' processes (docs/design.md, "The trust
# boundary"): its binary must be a PIE with full RELRO (GNU_RELRO, BIND_NOW), stack
# canaries (__stack_chk_fail referenced) and, where the build fortifies, glibc's checked
# calls (__*_chk).  The agent blob runs inside the traced program with no libc and the
# program's own canary: its object must reference nothing at all (no __stack_chk_*, no
# __*_chk, no memcpy), its linked form have no undefined symbol and no relocation.
set -u
BIN=$1 OBJ=$2 ELF=$3 FORTIFY=$4
fail=0
bad() { echo "FAIL: $*"; fail=1; }

command -v readelf >/dev/null 2>&1 || { echo "SKIP: readelf not found (binutils)"; exit 77; }
command -v nm >/dev/null 2>&1 || { echo "SKIP: nm not found (binutils)"; exit 77; }

readelf -h "$BIN" | grep -q 'Type:.*DYN' || bad "$BIN is not a PIE (ELF type not DYN)"
readelf -lW "$BIN" | grep -q GNU_RELRO || bad "$BIN has no GNU_RELRO segment"
readelf -dW "$BIN" | grep -Eq '\(BIND_NOW\)|\(FLAGS_1\).*NOW' ||
	bad "$BIN is not linked -z now (no BIND_NOW, no FLAGS_1 NOW)"
syms=$(nm -D --undefined-only "$BIN" 2>/dev/null)
echo "$syms" | grep -q '__stack_chk_fail' || bad "$BIN references no __stack_chk_fail"
if [ "$FORTIFY" = ON ]; then
	n=$(echo "$syms" | grep -c '__[a-z_]*_chk') || true
	[ "$n" -ge 3 ] || bad "$BIN references $n fortified calls (__*_chk): not built with _FORTIFY_SOURCE"
fi

und=$(nm --undefined-only "$OBJ")
[ -z "$und" ] || bad "the agent object references symbols: $(echo $und)"
nm "$OBJ" | grep -E '__stack_chk|_chk$' && bad "the agent object has a canary or fortify symbol"
und=$(nm --undefined-only "$ELF")
[ -z "$und" ] || bad "the agent blob has undefined symbols: $(echo $und)"
readelf -rW "$ELF" | grep -q 'Relocation section' && bad "the agent blob has relocations"

[ $fail = 0 ] && echo "ok: $BIN hardened (PIE, RELRO, BIND_NOW, canary, fortify=$FORTIFY); the agent blob freestanding"
exit $fail
