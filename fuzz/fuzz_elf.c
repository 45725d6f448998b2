// SPDX-License-Identifier: MIT
/*
 * Fuzz target: the ELF reader (src/sym/elf.c).
 *
 * The input is written to a memfd and opened through /proc/self/fd/N, as a file.  On
 * success every executable section's bytes are touched (a section that claims bytes
 * past the end of the file faults here), every function symbol is walked (sorted, with
 * readable names, found again by name and by address), and the vaddr <-> file offset
 * mapping is tried on the section and symbol addresses.  The separate debug file
 * lookup is pointed at a directory that does not exist, so the real /usr/lib/debug is
 * never searched.
 */
#include <elf.h>
#include <errno.h>
#include <gelf.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sym/sym.h"

#define MAX_WALK 4096 /* symbols looked up again, per input */

#define CHECK(cond)                                                                   \
	do {                                                                          \
		if (!(cond)) {                                                        \
			fprintf(stderr, "fuzz_elf: check failed: %s (%s:%d)\n", #cond, \
				__FILE__, __LINE__);                                  \
			abort();                                                      \
		}                                                                     \
	} while (0)

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	setenv("UPROBE_DEBUG_DIRS", "/nonexistent", 1);
	return 0;
}

struct walk {
	struct up_sym_elf *elf;
	uint64_t sum;
	unsigned n;
	uint64_t last_value;
	const char *last_name;
	uint64_t addrs[16];
	unsigned naddrs;
	bool wrapping_load; /* a PT_LOAD whose file image wraps the 64-bit space */
};

/*
 * Whether a PT_LOAD runs past the end of the address or offset space: the mapping
 * is then not invertible (an offset maps to a vaddr that wrapped), so the round trip
 * is not checked.
 */
static bool has_wrapping_load(const uint8_t *data, size_t size)
{
	char *copy = malloc(size ? size : 1);
	bool wraps = false;
	size_t n = 0;
	Elf *elf;

	if (!copy)
		return true;
	memcpy(copy, data, size);
	elf_version(EV_CURRENT);
	elf = elf_memory(copy, size);
	if (elf && elf_getphdrnum(elf, &n) == 0) {
		for (size_t i = 0; i < n; i++) {
			GElf_Phdr ph;

			if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
				continue;
			if (ph.p_vaddr + ph.p_filesz < ph.p_vaddr ||
			    ph.p_offset + ph.p_filesz < ph.p_offset)
				wraps = true;
		}
	}
	elf_end(elf);
	free(copy);
	return wraps;
}

static void add_addr(struct walk *w, uint64_t a)
{
	if (w->naddrs < sizeof(w->addrs) / sizeof(w->addrs[0]))
		w->addrs[w->naddrs++] = a;
}

static int on_section(const struct up_sym_section *sec, void *ctx)
{
	struct walk *w = ctx;
	const uint8_t *data = NULL;
	int rc;

	CHECK(sec->name);
	w->sum += strlen(sec->name);
	CHECK(sec->size == 0 || sec->data);
	for (uint64_t i = 0; i < sec->size; i++)
		w->sum += sec->data[i];
	add_addr(w, sec->vaddr);
	add_addr(w, sec->vaddr + sec->size / 2);
	if (sec->size) {
		rc = up_sym_elf_code(w->elf, sec->vaddr, 1, &data);
		CHECK(rc == 0 && data);
		w->sum += data[0];
		/* the last byte (held by this section, or an earlier one) */
		if (sec->vaddr + sec->size - 1 >= sec->vaddr) {
			rc = up_sym_elf_code(w->elf, sec->vaddr + sec->size - 1, 1, &data);
			CHECK(rc == 0 && data);
			w->sum += data[0];
		}
	}
	rc = up_sym_elf_code(w->elf, sec->vaddr, sec->size + 1, &data);
	CHECK(rc == 0 || rc == -ERANGE || rc == -ENOENT);
	return w->n++ > 1000;
}

static int on_func(const struct up_sym *sym, void *ctx)
{
	struct walk *w = ctx;
	struct up_sym again;

	CHECK(sym->name);
	w->sum += strlen(sym->name);
	if (w->n) {
		CHECK(sym->value >= w->last_value);
		if (sym->value == w->last_value)
			CHECK(strcmp(sym->name, w->last_name) >= 0);
	}
	w->last_value = sym->value;
	w->last_name = sym->name;
	if (w->n < MAX_WALK) {
		CHECK(up_sym_elf_lookup(w->elf, sym->name, &again) == 0);
		CHECK(!strcmp(again.name, sym->name));
		if (sym->size && sym->value + sym->size > sym->value) {
			CHECK(up_sym_elf_enclosing_func(w->elf, sym->value, &again) == 0);
			CHECK(again.value <= sym->value && sym->value - again.value < again.size);
			CHECK(again.value >= sym->value || again.value + again.size > sym->value);
		}
	}
	if (w->n < 4) {
		add_addr(w, sym->value);
		add_addr(w, sym->value + sym->size);
	}
	w->n++;
	return 0;
}

static void try_addr(struct walk *w, uint64_t a)
{
	struct up_sym sym;
	uint64_t off, back;

	if (up_sym_elf_enclosing_func(w->elf, a, &sym) == 0) {
		CHECK(sym.name);
		CHECK(sym.value <= a && a - sym.value < sym.size);
	}
	if (up_sym_elf_vaddr_to_offset(w->elf, a, &off) == 0 && !w->wrapping_load)
		CHECK(up_sym_elf_offset_to_vaddr(w->elf, off, &back) == 0);
	if (up_sym_elf_offset_to_vaddr(w->elf, a, &back) == 0 && !w->wrapping_load)
		CHECK(up_sym_elf_vaddr_to_offset(w->elf, back, &off) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint64_t fixed[] = { 0, 0x1000, 0x400000, 0x401000, 0x8048000, ~0ULL };
	struct up_sym_elf *elf = NULL;
	struct walk w = { 0 };
	struct up_sym sym;
	char path[64];
	int fd, rc, cls = 0;
	unsigned machine = 0;

	fd = memfd_create("fuzz_elf", MFD_CLOEXEC);
	if (fd < 0)
		return 0;
	for (size_t done = 0; done < size;) {
		ssize_t n = write(fd, data + done, size - done);

		if (n <= 0) {
			close(fd);
			return 0;
		}
		done += (size_t)n;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);

	rc = up_sym_elf_identify(path, &cls, &machine);
	CHECK(rc == 0 || rc == -ENOEXEC);
	CHECK(rc || cls == 32 || cls == 64);
	rc = up_sym_elf_open(path, &elf);
	CHECK(rc == 0 || rc == -ENOEXEC || rc == -ENOMEM);
	if (rc) {
		close(fd);
		return 0;
	}
	CHECK(up_sym_elf_class(elf) == 32 || up_sym_elf_class(elf) == 64);
	CHECK(up_sym_elf_machine(elf) == EM_X86_64 || up_sym_elf_machine(elf) == EM_386);
	CHECK(!strcmp(up_sym_elf_path(elf), path));
	(void)up_sym_elf_type(elf);
	CHECK(up_sym_elf_debug_path(elf) == NULL);

	w.elf = elf;
	w.wrapping_load = has_wrapping_load(data, size);
	rc = up_sym_elf_for_each_exec_section(elf, on_section, &w);
	CHECK(rc == 0 || rc == 1 || rc < 0);
	w.n = 0;
	rc = up_sym_elf_for_each_func(elf, on_func, &w);
	CHECK(rc == 0 || rc < 0);
	/* a second walk sees the same table */
	if (up_sym_elf_lookup(elf, "main", &sym) == 0) {
		CHECK(!strcmp(sym.name, "main"));
		add_addr(&w, sym.value);
		add_addr(&w, sym.value + 1);
	}
	CHECK(up_sym_elf_lookup(elf, "", &sym) == 0 || true);
	for (unsigned i = 0; i < w.naddrs; i++)
		try_addr(&w, w.addrs[i]);
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		try_addr(&w, fixed[i]);
	up_sym_elf_close(elf);
	close(fd);
	/* keep the sum alive so the reads above are not optimised away */
	if (w.sum == 0x5eed5eed5eed5eedULL)
		fprintf(stderr, "fuzz_elf: %llu\n", (unsigned long long)w.sum);
	return 0;
}
