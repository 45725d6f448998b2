// SPDX-License-Identifier: MIT
/*
 * Where a probe may stand, judged from the file alone (up_sym_elf_check_place): in the
 * file's code, inside a function the file describes, and a return probe at the
 * function's entry.  The front ends ask before anything is written into a process, so a
 * spec that could only corrupt the program (a return probe off an entry takes a word
 * that is not a return address) or never fire (an address in data) is refused with its
 * reason.  Whether the address is an instruction boundary is ubp.c's to say: it decodes
 * the function once per file.  Nothing here prints.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "sym/sym.h"

static void place_name(struct up_sym_elf *elf, uint64_t vaddr, char *buf, size_t size)
{
	struct up_sym sym;

	if (up_sym_elf_enclosing_func(elf, vaddr, &sym))
		snprintf(buf, size, "0x%" PRIx64, vaddr);
	else if (vaddr != sym.value)
		snprintf(buf, size, "0x%" PRIx64 " (%s+0x%" PRIx64 ")", vaddr, sym.name,
			 vaddr - sym.value);
	else
		snprintf(buf, size, "0x%" PRIx64 " (%s)", vaddr, sym.name);
}

int up_sym_elf_check_place(struct up_sym_elf *elf, uint64_t vaddr, bool is_return, char *why,
			   size_t whylen)
{
	const uint8_t *code;
	struct up_sym sym;
	char where[160];

	place_name(elf, vaddr, where, sizeof(where));
	if (up_sym_elf_code(elf, vaddr, 1, &code)) {
		snprintf(why, whylen,
			 "%s is outside the file's code (no executable section holds it)", where);
		return -EINVAL;
	}
	if (up_sym_elf_full_symbols(elf) && up_sym_elf_enclosing_code(elf, vaddr, &sym) &&
	    up_sym_elf_func_entry(elf, vaddr, &sym)) {
		snprintf(why, whylen,
			 "%s is inside no function the file describes (no symbol and no "
			 "unwind entry covers it)",
			 where);
		return -EINVAL;
	}
	if (is_return && up_sym_elf_func_entry(elf, vaddr, &sym)) {
		snprintf(why, whylen,
			 "a return probe must be at a function's entry, and %s is not one: it "
			 "would take a word that is not a return address",
			 where);
		return -EINVAL;
	}
	return 0;
}
