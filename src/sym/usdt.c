// SPDX-License-Identifier: MIT
/*
 * The SDT note reader.  A crash course in what it reads (systemtap's sdt.h, and the
 * "Dtrace probes in glibc" / stapsdt-notes writeup):
 *
 *   - every STAP_PROBE site is a `nop` in the code and an ELF note of type 3
 *     (NT_STAPSDT), owner "stapsdt", in section .note.stapsdt (not loaded);
 *   - the note's descriptor is three target-sized words, the site's address, the
 *     address of the .stapsdt.base section at link time, and the semaphore's address
 *     (0: none), then three NUL-terminated strings: provider, name, arguments;
 *   - when the file was prelinked, its .stapsdt.base moved: both addresses move by
 *     the difference between the section's address now and the note's base word;
 *   - the arguments are blank-separated "SIZE@OPERAND" pairs, in the assembler's
 *     AT&T syntax, the operand being whatever register or memory reference the
 *     compiler chose for the "nor" asm constraint (so: a register, a constant, or a
 *     base+offset memory reference, rip-relative ones naming a symbol).
 *
 * It owns the file's notes, copied out of libelf (each string its own allocation)
 * so that the file can be closed at once.  It never prints, never exits and never writes to the file.
 */
#include "sym/usdt.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sym/file.h"
#include "sym/sym.h"

#define NT_STAPSDT 3

struct up_usdt_file {
	struct up_usdt_probe *probes;
	size_t n, cap;
};

struct reg_name {
	const char *name;
	const char *kernel;
	uint8_t size;
};

/* The x86-64 register names an operand may use, with the kernel's name of the whole
   register.  ah, bh, ch and dh are left out: uprobe_events cannot shift. */
static const struct reg_name regs[] = {
	{ "rax", "ax", 8 },  { "eax", "ax", 4 },   { "ax", "ax", 2 },	 { "al", "ax", 1 },
	{ "rbx", "bx", 8 },  { "ebx", "bx", 4 },   { "bx", "bx", 2 },	 { "bl", "bx", 1 },
	{ "rcx", "cx", 8 },  { "ecx", "cx", 4 },   { "cx", "cx", 2 },	 { "cl", "cx", 1 },
	{ "rdx", "dx", 8 },  { "edx", "dx", 4 },   { "dx", "dx", 2 },	 { "dl", "dx", 1 },
	{ "rsi", "si", 8 },  { "esi", "si", 4 },   { "si", "si", 2 },	 { "sil", "si", 1 },
	{ "rdi", "di", 8 },  { "edi", "di", 4 },   { "di", "di", 2 },	 { "dil", "di", 1 },
	{ "rbp", "bp", 8 },  { "ebp", "bp", 4 },   { "bp", "bp", 2 },	 { "bpl", "bp", 1 },
	{ "rsp", "sp", 8 },  { "esp", "sp", 4 },   { "sp", "sp", 2 },	 { "spl", "sp", 1 },
	{ "r8", "r8", 8 },   { "r8d", "r8", 4 },   { "r8w", "r8", 2 },	 { "r8b", "r8", 1 },
	{ "r9", "r9", 8 },   { "r9d", "r9", 4 },   { "r9w", "r9", 2 },	 { "r9b", "r9", 1 },
	{ "r10", "r10", 8 }, { "r10d", "r10", 4 }, { "r10w", "r10", 2 }, { "r10b", "r10", 1 },
	{ "r11", "r11", 8 }, { "r11d", "r11", 4 }, { "r11w", "r11", 2 }, { "r11b", "r11", 1 },
	{ "r12", "r12", 8 }, { "r12d", "r12", 4 }, { "r12w", "r12", 2 }, { "r12b", "r12", 1 },
	{ "r13", "r13", 8 }, { "r13d", "r13", 4 }, { "r13w", "r13", 2 }, { "r13b", "r13", 1 },
	{ "r14", "r14", 8 }, { "r14d", "r14", 4 }, { "r14w", "r14", 2 }, { "r14b", "r14", 1 },
	{ "r15", "r15", 8 }, { "r15d", "r15", 4 }, { "r15w", "r15", 2 }, { "r15b", "r15", 1 },
	{ "rip", "ip", 8 },
};

static const struct reg_name *reg_lookup(const char *s, size_t len)
{
	for (size_t i = 0; i < sizeof(regs) / sizeof(regs[0]); i++)
		if (strlen(regs[i].name) == len && !memcmp(regs[i].name, s, len))
			return &regs[i];
	return NULL;
}

static bool parse_int(const char *s, size_t len, int64_t *out)
{
	char buf[32], *end;

	if (!len || len >= sizeof(buf))
		return false;
	memcpy(buf, s, len);
	buf[len] = '\0';
	errno = 0;
	*out = strtoll(buf, &end, 0);
	if (errno == ERANGE && buf[0] != '-') /* 0xffffffffffffffff */
		*out = (int64_t)strtoull(buf, &end, 0), errno = 0;
	return !errno && end == buf + len;
}

int up_usdt_arg_parse(const char *text, size_t len, struct up_usdt_arg *arg,
		      up_usdt_resolve_fn resolve, void *ctx)
{
	const char *at = memchr(text, '@', len), *p, *end = text + len;
	const struct reg_name *rn;
	int64_t size = 8;

	memset(arg, 0, sizeof(*arg));
	p = text;
	if (at) {
		if (!parse_int(text, (size_t)(at - text), &size))
			return -EINVAL;
		p = at + 1;
	}
	arg->is_signed = size < 0;
	size = size < 0 ? -size : size;
	if (size != 1 && size != 2 && size != 4 && size != 8)
		return -EINVAL;
	arg->size = (uint8_t)size;
	if (p >= end)
		return -EINVAL;
	if (*p == '$') { /* a constant */
		arg->kind = UP_USDT_ARG_CONST;
		return parse_int(p + 1, (size_t)(end - p - 1), &arg->value) ? 0 : -EINVAL;
	}
	if (*p == '%') { /* a register */
		rn = reg_lookup(p + 1, (size_t)(end - p - 1));
		if (!rn || !strcmp(rn->kernel, "ip"))
			return -EINVAL;
		arg->kind = UP_USDT_ARG_REG;
		snprintf(arg->reg, sizeof(arg->reg), "%s", rn->kernel);
		if (!at) /* no size given: the register's */
			arg->size = rn->size;
		return 0;
	}
	/* memory: [DISP](%REG), DISP a number, or SYMBOL[+-NUM] with %rip */
	{
		const char *open = memchr(p, '(', (size_t)(end - p));
		const char *disp_end;
		int64_t disp = 0;

		if (!open || end[-1] != ')' || open[1] != '%')
			return -EINVAL;
		if (memchr(open, ',', (size_t)(end - open)))
			return -EINVAL; /* base + index * scale: uprobe_events has no such fetch */
		rn = reg_lookup(open + 2, (size_t)(end - 1 - open - 2));
		if (!rn || rn->size != 8)
			return -EINVAL;
		disp_end = open;
		if (disp_end > p && (isalpha((unsigned char)*p) || *p == '_' || *p == '.')) {
			/* SYMBOL[+-NUM](%rip) */
			const char *q = p;
			char sym[256];
			uint64_t foff;
			int rc;

			while (q < disp_end && *q != '+' && *q != '-')
				q++;
			if (strcmp(rn->kernel, "ip") || (size_t)(q - p) >= sizeof(sym))
				return -EINVAL;
			if (q < disp_end && !parse_int(q, (size_t)(disp_end - q), &disp))
				return -EINVAL;
			memcpy(sym, p, (size_t)(q - p));
			sym[q - p] = '\0';
			if (!resolve)
				return -ENOENT;
			rc = resolve(ctx, sym, &foff);
			if (rc)
				return rc;
			arg->kind = UP_USDT_ARG_FOFFS;
			arg->value = (int64_t)foff + disp;
			return 0;
		}
		if (disp_end > p && !parse_int(p, (size_t)(disp_end - p), &disp))
			return -EINVAL;
		if (!strcmp(rn->kernel, "ip"))
			return -EINVAL; /* a numeric rip-relative operand: rare, and needs the site */
		arg->kind = UP_USDT_ARG_MEM;
		arg->value = disp;
		snprintf(arg->reg, sizeof(arg->reg), "%s", rn->kernel);
		return 0;
	}
}

int up_usdt_arg_fetch(const struct up_usdt_arg *a, char *buf, size_t size)
{
	switch (a->kind) {
	case UP_USDT_ARG_CONST:
		return snprintf(buf, size, "\\%" PRId64, a->value);
	case UP_USDT_ARG_REG:
		return snprintf(buf, size, "%%%s", a->reg);
	case UP_USDT_ARG_MEM:
		return snprintf(buf, size, "%s%" PRId64 "(%%%s)", a->value < 0 ? "" : "+", a->value,
				a->reg);
	case UP_USDT_ARG_FOFFS:
		return snprintf(buf, size, "@+0x%" PRIx64, (uint64_t)a->value);
	}
	return snprintf(buf, size, "?");
}

int up_usdt_arg_type(const struct up_usdt_arg *a, char *buf, size_t size)
{
	return snprintf(buf, size, "%c%u", a->is_signed ? 's' : 'u', a->size * 8u);
}

/* ---- the notes ------------------------------------------------------------------------------ */

struct reader {
	Elf *elf;
	const char *path;
	struct up_sym_elf *syms; /* opened for the first SYMBOL(%rip) operand */
	bool syms_tried;
	uint64_t site_vaddr, site_offset; /* the probe being read */
};

static int resolve_sym(void *ctx, const char *name, uint64_t *foff)
{
	struct reader *r = ctx;
	struct up_sym sym;

	if (!r->syms_tried) {
		r->syms_tried = true;
		if (up_sym_elf_open(r->path, &r->syms))
			r->syms = NULL;
	}
	if (!r->syms)
		return -ENOENT;
	if (up_sym_elf_lookup_object(r->syms, name, &sym) && up_sym_elf_lookup(r->syms, name, &sym))
		return -ENOENT;
	/* the kernel's @+OFFSET is taken relative to the probed instruction's mapping
	   (translate_user_vaddr: the probe's address - its file offset + OFFSET), so a
	   datum in another segment is named by its distance from the probe site */
	*foff = sym.value - r->site_vaddr + r->site_offset;
	return 0;
}

static bool vaddr_to_offset(Elf *elf, uint64_t vaddr, uint64_t *off)
{
	size_t n;

	if (elf_getphdrnum(elf, &n))
		return false;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_filesz) {
			*off = vaddr - ph.p_vaddr + ph.p_offset;
			return true;
		}
	}
	return false;
}

static void parse_args(struct up_usdt_probe *p, struct reader *r)
{
	const char *s = p->args_text;

	r->site_vaddr = p->vaddr;
	r->site_offset = p->offset;
	p->nargs = 0;
	while (*s) {
		const char *e;

		while (*s == ' ')
			s++;
		if (!*s)
			break;
		e = s;
		while (*e && *e != ' ')
			e++;
		if (p->nargs == UP_USDT_ARGS_MAX ||
		    up_usdt_arg_parse(s, (size_t)(e - s), &p->args[p->nargs], resolve_sym, r)) {
			p->nargs = -1;
			return;
		}
		p->nargs++;
		s = e;
	}
}

static int add_note(struct up_usdt_file *f, Elf *elf, const char *desc, size_t len,
		    uint64_t base_now, bool have_base)
{
	int word = gelf_getclass(elf) == ELFCLASS32 ? 4 : 8;
	uint64_t w[3] = { 0 };
	const char *s = desc + 3 * word, *end = desc + len, *prov, *name, *args;
	struct up_usdt_probe *p;

	if (len < (size_t)(3 * word) + 3)
		return 0; /* malformed: skipped */
	for (int i = 0; i < 3; i++) {
		if (word == 4) {
			uint32_t v;

			memcpy(&v, desc + i * 4, 4);
			w[i] = v;
		} else {
			memcpy(&w[i], desc + i * 8, 8);
		}
	}
	prov = s;
	name = memchr(prov, '\0', (size_t)(end - prov));
	if (!name++ || name >= end)
		return 0;
	args = memchr(name, '\0', (size_t)(end - name));
	if (!args++ || args >= end || !memchr(args, '\0', (size_t)(end - args)))
		return 0;
	if (f->n == f->cap) {
		size_t cap = f->cap ? f->cap * 2 : 16;
		struct up_usdt_probe *np = realloc(f->probes, cap * sizeof(*np));

		if (!np)
			return -ENOMEM;
		f->probes = np;
		f->cap = cap;
	}
	p = &f->probes[f->n];
	memset(p, 0, sizeof(*p));
	if (have_base) { /* prelinked: both move with .stapsdt.base */
		w[0] += base_now - w[1];
		if (w[2])
			w[2] += base_now - w[1];
	}
	p->vaddr = w[0];
	p->sema_vaddr = w[2];
	if (!vaddr_to_offset(elf, p->vaddr, &p->offset))
		p->offset = p->vaddr; /* a relocatable object: no segments */
	if (p->sema_vaddr && !vaddr_to_offset(elf, p->sema_vaddr, &p->sema_offset))
		p->sema_offset = p->sema_vaddr;
	f->n++; /* from here, up_usdt_close frees its strings */
	p->provider = strdup(prov);
	p->name = strdup(name);
	p->args_text = strdup(args);
	if (!p->provider || !p->name || !p->args_text)
		return -ENOMEM;
	return 0;
}

int up_usdt_open(const char *path, struct up_usdt_file **out)
{
	struct up_usdt_file *f;
	struct reader r = { .path = path };
	uint64_t base_now = 0;
	bool have_base = false;
	size_t shstrndx;
	Elf_Scn *scn = NULL;
	int fd, rc = 0;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOSYS;
	fd = up_file_open(path, NULL, true);
	if (fd < 0)
		return fd;
	r.elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!r.elf || elf_kind(r.elf) != ELF_K_ELF || elf_getshdrstrndx(r.elf, &shstrndx)) {
		elf_end(r.elf);
		close(fd);
		return -ENOEXEC;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		rc = -ENOMEM;
		goto out;
	}
	while ((scn = elf_nextscn(r.elf, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh))
			continue;
		name = elf_strptr(r.elf, shstrndx, sh.sh_name);
		if (name && !strcmp(name, ".stapsdt.base")) {
			base_now = sh.sh_addr;
			have_base = true;
		}
	}
	while (!rc && (scn = elf_nextscn(r.elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *data;
		GElf_Nhdr nh;
		size_t off = 0, noff, doff;
		const char *name;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		name = elf_strptr(r.elf, shstrndx, sh.sh_name);
		if (!name || strcmp(name, ".note.stapsdt"))
			continue;
		data = elf_getdata(scn, NULL);
		while (data && !rc && (off = gelf_getnote(data, off, &nh, &noff, &doff)) > 0) {
			const char *d = data->d_buf;

			if (nh.n_type != NT_STAPSDT || nh.n_namesz != 8 ||
			    memcmp(d + noff, "stapsdt", 8))
				continue;
			rc = add_note(f, r.elf, d + doff, nh.n_descsz, base_now, have_base);
		}
	}
	if (rc)
		goto out;
	for (size_t i = 0; i < f->n; i++)
		parse_args(&f->probes[i], &r);
out:
	up_sym_elf_close(r.syms);
	elf_end(r.elf);
	close(fd);
	if (rc) {
		up_usdt_close(f);
		return rc;
	}
	*out = f;
	return 0;
}

void up_usdt_close(struct up_usdt_file *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->n; i++) {
		free((char *)f->probes[i].provider);
		free((char *)f->probes[i].name);
		free((char *)f->probes[i].args_text);
	}
	free(f->probes);
	free(f);
}

size_t up_usdt_count(const struct up_usdt_file *f)
{
	return f->n;
}

const struct up_usdt_probe *up_usdt_probe(const struct up_usdt_file *f, size_t i)
{
	return i < f->n ? &f->probes[i] : NULL;
}
