#!/bin/sh
# SPDX-License-Identifier: MIT
# usage: bad_elf.sh UPROBE ELF
# Broken copies of an x86 ELF file must be refused by decode and list with exit status 2
# and a message naming the file: one with e_machine set to 183 (aarch64), one cut off
# after 4096 bytes (its section table is gone).
set -e
uprobe=$1
src=$2
here=$(dirname "$0")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cp "$src" "$tmp/foreign"
# e_machine is the 16-bit little-endian field at offset 18 of the ELF header
printf '\267\000' | dd of="$tmp/foreign" bs=1 seek=18 conv=notrunc 2>/dev/null
head -c 4096 "$src" >"$tmp/truncated"

for cmd in decode list; do
	"$here/expect_exit.sh" 2 "^uprobe $cmd: .*/foreign: ELF(32|64) machine 183 \(aarch64\) is not x86" \
		"$uprobe" $cmd "$tmp/foreign"
	"$here/expect_exit.sh" 2 "^uprobe $cmd: .*/truncated: truncated or corrupt ELF file$" \
		"$uprobe" $cmd "$tmp/truncated"
done
