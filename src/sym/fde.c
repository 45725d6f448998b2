// SPDX-License-Identifier: MIT
/*
 * The functions a file's .eh_frame describes: every FDE's [initial_location,
 * initial_location + address_range), sorted.  libdw's dwarf_cfi_addrframe answers for
 * one pc with the range of a row of the table (where the CFA rule holds), not the FDE's,
 * so where a function begins is read here from the entries themselves
 * (dwarf_next_cfi), decoding the pointers as each CIE's 'R' augmentation says.
 *
 * The file is input from anyone (a traced process names it): every read is bounded by
 * the entry libdw delimited, an encoding we do not know skips the entry.  Prefix: up_fde_.
 */
#include <errno.h>
#include <gelf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <elfutils/libdw.h>

#include "sym/fde.h"

#define PE_OMIT 0xff

struct cie_enc {
	Dwarf_Off off;
	uint8_t enc; /* the FDEs' pointer encoding (DW_EH_PE_*) */
};

static int uleb(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	unsigned shift = 0;

	*v = 0;
	while (*p < end && shift < 64) {
		uint8_t b = *(*p)++;

		*v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80))
			return 0;
	}
	return -1;
}

/* An encoded value at *p (advanced past it); pcrel against the vaddr of *p itself. */
static int read_enc(const uint8_t **p, const uint8_t *end, uint8_t enc, int elf_class,
		    uint64_t p_vaddr, uint64_t *v)
{
	const uint8_t *q = *p;
	size_t size;
	int64_t sv;

	switch (enc & 0x0f) {
	case 0x00: /* absptr */
		size = elf_class == ELFCLASS32 ? 4 : 8;
		break;
	case 0x01: /* uleb128 */
		if (uleb(p, end, v))
			return -1;
		goto applied;
	case 0x02:
	case 0x0a:
		size = 2;
		break;
	case 0x03:
	case 0x0b:
		size = 4;
		break;
	case 0x04:
	case 0x0c:
		size = 8;
		break;
	default:
		return -1; /* sleb128 and the rest: never seen in an FDE's pointers */
	}
	if ((size_t)(end - q) < size)
		return -1;
	*v = 0;
	memcpy(v, q, size); /* x86: little-endian, as the host */
	if (enc & 0x08) {   /* signed */
		sv = size == 2 ? (int16_t)*v : size == 4 ? (int32_t)*v : (int64_t)*v;
		*v = (uint64_t)sv;
	} else if ((enc & 0x0f) == 0x00 && size == 4) {
		*v = (uint32_t)*v;
	}
	*p = q + size;
applied:
	switch (enc & 0x70) {
	case 0x00:
		break;
	case 0x10: /* pcrel */
		*v += p_vaddr;
		break;
	default:
		return -1; /* textrel, datarel, funcrel, aligned: not in .eh_frame's FDEs */
	}
	if (enc & 0x80)
		return -1; /* indirect */
	return 0;
}

/* The 'R' encoding of a CIE's augmentation, or PE_OMIT when it cannot be told. */
static uint8_t cie_fde_encoding(const Dwarf_CIE *cie, int elf_class)
{
	const char *aug = cie->augmentation;
	const uint8_t *p = cie->augmentation_data;
	const uint8_t *end = p ? p + cie->augmentation_data_size : NULL;
	uint64_t skip;

	if (!aug || aug[0] != 'z')
		return aug && aug[0] == '\0' ? 0x00 : PE_OMIT;
	for (aug++; *aug; aug++) {
		switch (*aug) {
		case 'R':
			if (!p || p >= end)
				return PE_OMIT;
			return *p;
		case 'L':
			if (!p || p >= end)
				return PE_OMIT;
			p++;
			break;
		case 'P': {
			uint8_t penc;

			if (!p || p >= end)
				return PE_OMIT;
			penc = *p++;
			if (read_enc(&p, end, penc & 0x0f, elf_class, 0, &skip))
				return PE_OMIT;
			break;
		}
		case 'S':
		case 'B':
			break;
		default:
			return PE_OMIT;
		}
	}
	return 0x00; /* no 'R': absolute pointers */
}

static int cmp_fde(const void *pa, const void *pb)
{
	const struct up_fde *a = pa, *b = pb;

	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	return (a->end > b->end) - (a->end < b->end);
}

static int add(void **v, size_t *n, size_t *cap, size_t elem, const void *x)
{
	if (*n == *cap) {
		size_t nc = *cap ? 2 * *cap : 64;
		void *nv = realloc(*v, nc * elem);

		if (!nv)
			return -ENOMEM;
		*v = nv;
		*cap = nc;
	}
	memcpy((char *)*v + *n * elem, x, elem);
	(*n)++;
	return 0;
}

static int scan(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh, bool eh, struct up_fde **fdes,
		size_t *nf, size_t *capf)
{
	const unsigned char *ident = (const unsigned char *)elf_getident(elf, NULL);
	int elf_class = gelf_getclass(elf);
	struct cie_enc *cies = NULL;
	size_t ncies = 0, capc = 0;
	Elf_Data *data = elf_getdata(scn, NULL);
	Dwarf_Off off = 0, next;
	int rc = 0;

	if (!ident || !data || !data->d_buf)
		return 0;
	while (off < data->d_size) {
		Dwarf_CFI_Entry ent;
		int r = dwarf_next_cfi(ident, data, eh, off, &next, &ent);

		if (r > 0)
			break;
		if (r < 0) {
			if (next == (Dwarf_Off)-1 || next <= off)
				break;
			off = next;
			continue;
		}
		if (dwarf_cfi_cie_p(&ent)) {
			struct cie_enc c = { off, cie_fde_encoding(&ent.cie, elf_class) };

			rc = add((void **)&cies, &ncies, &capc, sizeof(c), &c);
			if (rc)
				break;
		} else {
			const uint8_t *p = ent.fde.start, *end = ent.fde.end;
			uint8_t enc = PE_OMIT;
			struct up_fde f;
			uint64_t range;

			for (size_t i = ncies; i-- > 0;)
				if (cies[i].off == ent.fde.CIE_pointer) {
					enc = cies[i].enc;
					break;
				}
			if (enc != PE_OMIT && p >= (const uint8_t *)data->d_buf && p < end &&
			    !read_enc(&p, end, enc, elf_class,
				      sh->sh_addr + (uint64_t)(p - (const uint8_t *)data->d_buf),
				      &f.start) &&
			    !read_enc(&p, end, enc & 0x0f, elf_class, 0, &range) && range &&
			    f.start + range > f.start) {
				f.end = f.start + range;
				rc = add((void **)fdes, nf, capf, sizeof(f), &f);
				if (rc)
					break;
			}
		}
		if (next == (Dwarf_Off)-1 || next <= off)
			break;
		off = next;
	}
	free(cies);
	return rc;
}

static int table(Elf *elf, const char *section, struct up_fde **out, size_t *n)
{
	struct up_fde *v = NULL;
	size_t nv = 0, cap = 0, shstrndx;
	Elf_Scn *scn = NULL;
	int rc = 0;

	*out = NULL;
	*n = 0;
	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return -ENOENT;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS)
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name || strcmp(name, section))
			continue;
		rc = scan(elf, scn, &sh, !strcmp(section, ".eh_frame"), &v, &nv, &cap);
		break;
	}
	if (rc) {
		free(v);
		return rc;
	}
	if (nv)
		qsort(v, nv, sizeof(*v), cmp_fde);
	*out = v;
	*n = nv;
	return 0;
}

const struct up_fde *up_fde_find(const struct up_fde *v, size_t n, uint64_t vaddr)
{
	size_t lo = 0, hi = n;

	/* the last FDE starting at or before vaddr; FDEs do not nest */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid].start <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || vaddr >= v[lo - 1].end)
		return NULL;
	return &v[lo - 1];
}

int up_fde_table(Elf *elf, struct up_fde **out, size_t *n)
{
	return table(elf, ".eh_frame", out, n);
}

int up_fde_table_debug(Elf *elf, struct up_fde **out, size_t *n)
{
	return table(elf, ".debug_frame", out, n);
}
