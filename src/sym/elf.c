// SPDX-License-Identifier: MIT
/*
 * The ELF reader (libelf).  It owns the open file and the mapping the section bytes and
 * symbol names point into, and a lazily built, address-sorted table of the function
 * symbols.  It must never print or exit, and never write to the file.
 */
#include "sym/sym.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct up_sym_elf {
	char *path;
	int fd;
	Elf *elf;
	int elf_class;
	unsigned machine;
	unsigned type;
	size_t shstrndx;
	/* function symbols sorted by (value, name, dynamic); built on first use */
	struct up_sym *funcs;
	size_t nr_funcs;
	bool funcs_built;
};

static int elf_open_raw(const char *path, int *fdp, Elf **elfp)
{
	struct stat st;
	Elf *elf;
	int fd;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOSYS;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	if (S_ISDIR(st.st_mode)) {
		close(fd);
		return -EISDIR;
	}

	/*
	 * Read, not mmap: the kernel puts its uprobes' int3s into every private mapping
	 * of a probed file (any VM_MAYEXEC one), so a mapping of libc while perf or
	 * bpftrace probes it shows their breakpoints, not the file.
	 */
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		elf_end(elf);
		close(fd);
		return -ENOEXEC;
	}
	*fdp = fd;
	*elfp = elf;
	return 0;
}

int up_sym_elf_identify(const char *path, int *elf_class, unsigned *machine)
{
	GElf_Ehdr ehdr;
	Elf *elf;
	int fd, err, cls;

	err = elf_open_raw(path, &fd, &elf);
	if (err)
		return err;

	err = -ENOEXEC;
	cls = gelf_getclass(elf);
	if ((cls == ELFCLASS32 || cls == ELFCLASS64) && gelf_getehdr(elf, &ehdr)) {
		if (elf_class)
			*elf_class = cls == ELFCLASS32 ? 32 : 64;
		if (machine)
			*machine = ehdr.e_machine;
		err = 0;
	}
	elf_end(elf);
	close(fd);
	return err;
}

int up_sym_elf_open(const char *path, struct up_sym_elf **out)
{
	struct up_sym_elf *e;
	size_t nr_sections;
	GElf_Ehdr ehdr;
	int cls, err;

	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->fd = -1;
	e->path = strdup(path);
	if (!e->path) {
		err = -ENOMEM;
		goto err_free;
	}

	err = elf_open_raw(path, &e->fd, &e->elf);
	if (err)
		goto err_free;

	err = -ENOEXEC;
	cls = gelf_getclass(e->elf);
	if (cls != ELFCLASS32 && cls != ELFCLASS64)
		goto err_close;
	if (!gelf_getehdr(e->elf, &ehdr))
		goto err_close;
	if (ehdr.e_machine != EM_X86_64 && ehdr.e_machine != EM_386)
		goto err_close;
	if (elf_getshdrstrndx(e->elf, &e->shstrndx) != 0)
		goto err_close;
	/* libelf reports a section table cut off by the end of the file as no sections */
	if (ehdr.e_shoff && (elf_getshdrnum(e->elf, &nr_sections) != 0 || !nr_sections))
		goto err_close;

	e->elf_class = cls == ELFCLASS32 ? 32 : 64;
	e->machine = ehdr.e_machine;
	e->type = ehdr.e_type;
	*out = e;
	return 0;

err_close:
	elf_end(e->elf);
	close(e->fd);
err_free:
	free(e->path);
	free(e);
	return err;
}

void up_sym_elf_close(struct up_sym_elf *e)
{
	if (!e)
		return;
	free(e->funcs);
	elf_end(e->elf);
	if (e->fd >= 0)
		close(e->fd);
	free(e->path);
	free(e);
}

const char *up_sym_elf_path(const struct up_sym_elf *e)
{
	return e->path;
}

int up_sym_elf_class(const struct up_sym_elf *e)
{
	return e->elf_class;
}

unsigned up_sym_elf_machine(const struct up_sym_elf *e)
{
	return e->machine;
}

unsigned up_sym_elf_type(const struct up_sym_elf *e)
{
	return e->type;
}

/* ---- sections ---------------------------------------------------------------------- */

/* Fills *sec for an executable section with file bytes; false for any other section. */
static bool exec_section(struct up_sym_elf *e, Elf_Scn *scn, struct up_sym_section *sec)
{
	GElf_Shdr shdr;
	Elf_Data *data;

	if (!gelf_getshdr(scn, &shdr))
		return false;
	if (!(shdr.sh_flags & SHF_EXECINSTR) || shdr.sh_type == SHT_NOBITS || !shdr.sh_size)
		return false;
	data = elf_getdata(scn, NULL);
	if (!data || !data->d_buf)
		return false;

	sec->name = elf_strptr(e->elf, e->shstrndx, shdr.sh_name);
	if (!sec->name)
		sec->name = "";
	sec->vaddr = shdr.sh_addr;
	sec->size = data->d_size < shdr.sh_size ? data->d_size : shdr.sh_size;
	sec->offset = shdr.sh_offset;
	sec->data = data->d_buf;
	return true;
}

int up_sym_elf_for_each_exec_section(struct up_sym_elf *e, up_sym_section_fn fn, void *ctx)
{
	struct up_sym_section sec;
	Elf_Scn *scn = NULL;
	int ret;

	while ((scn = elf_nextscn(e->elf, scn))) {
		if (!exec_section(e, scn, &sec))
			continue;
		ret = fn(&sec, ctx);
		if (ret)
			return ret;
	}
	return 0;
}

int up_sym_elf_code(struct up_sym_elf *e, uint64_t vaddr, uint64_t size, const uint8_t **data)
{
	struct up_sym_section sec;
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(e->elf, scn))) {
		if (!exec_section(e, scn, &sec))
			continue;
		if (vaddr < sec.vaddr || vaddr - sec.vaddr >= sec.size)
			continue;
		if (size > sec.size - (vaddr - sec.vaddr))
			return -ERANGE;
		*data = sec.data + (vaddr - sec.vaddr);
		return 0;
	}
	return -ENOENT;
}

/* ---- symbols ----------------------------------------------------------------------- */

/* Calls fn(sym, ctx) for each defined function symbol of a table (SHT_SYMTAB/DYNSYM). */
static int scan_symtab(struct up_sym_elf *e, Elf64_Word sh_type,
		       int (*fn)(const struct up_sym *sym, void *ctx), void *ctx)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr shdr;
	int ret;

	while ((scn = elf_nextscn(e->elf, scn))) {
		Elf_Data *data;
		size_t i, n;

		if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != sh_type || !shdr.sh_entsize)
			continue;
		data = elf_getdata(scn, NULL);
		if (!data)
			continue;
		n = shdr.sh_size / shdr.sh_entsize;
		for (i = 0; i < n; i++) {
			struct up_sym s;
			GElf_Sym sym;
			unsigned type, bind;

			if (!gelf_getsym(data, (int)i, &sym))
				break;
			type = GELF_ST_TYPE(sym.st_info);
			bind = GELF_ST_BIND(sym.st_info);
			if (type != STT_FUNC && type != STT_GNU_IFUNC)
				continue;
			if (sym.st_shndx == SHN_UNDEF)
				continue;
			s.name = elf_strptr(e->elf, shdr.sh_link, sym.st_name);
			if (!s.name || !*s.name)
				continue;
			s.value = sym.st_value;
			s.size = sym.st_size;
			s.global = bind == STB_GLOBAL || bind == STB_WEAK || bind == STB_GNU_UNIQUE;
			s.ifunc = type == STT_GNU_IFUNC;
			s.dynamic = sh_type == SHT_DYNSYM;
			ret = fn(&s, ctx);
			if (ret)
				return ret;
		}
	}
	return 0;
}

struct lookup_ctx {
	const char *name;
	struct up_sym *out;
};

static int lookup_one(const struct up_sym *sym, void *ctx)
{
	struct lookup_ctx *lc = ctx;

	if (strcmp(sym->name, lc->name))
		return 0;
	*lc->out = *sym;
	return 1;
}

int up_sym_elf_lookup(struct up_sym_elf *e, const char *name, struct up_sym *out)
{
	struct lookup_ctx lc = { .name = name, .out = out };

	if (scan_symtab(e, SHT_SYMTAB, lookup_one, &lc) > 0)
		return 0;
	if (scan_symtab(e, SHT_DYNSYM, lookup_one, &lc) > 0)
		return 0;
	return -ENOENT;
}

struct collect_ctx {
	struct up_sym *v;
	size_t n, cap;
};

static int collect_one(const struct up_sym *sym, void *ctx)
{
	struct collect_ctx *cc = ctx;

	if (cc->n == cc->cap) {
		size_t cap = cc->cap ? cc->cap * 2 : 256;
		struct up_sym *v = realloc(cc->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		cc->v = v;
		cc->cap = cap;
	}
	cc->v[cc->n++] = *sym;
	return 0;
}

static int cmp_sym(const void *pa, const void *pb)
{
	const struct up_sym *a = pa, *b = pb;
	int c;

	if (a->value != b->value)
		return a->value < b->value ? -1 : 1;
	c = strcmp(a->name, b->name);
	if (c)
		return c;
	return (int)a->dynamic - (int)b->dynamic;
}

static int build_funcs(struct up_sym_elf *e)
{
	struct collect_ctx cc = { 0 };
	size_t i, n;
	int err;

	if (e->funcs_built)
		return 0;
	err = scan_symtab(e, SHT_SYMTAB, collect_one, &cc);
	if (!err)
		err = scan_symtab(e, SHT_DYNSYM, collect_one, &cc);
	if (err) {
		free(cc.v);
		return err;
	}
	if (cc.n)
		qsort(cc.v, cc.n, sizeof(*cc.v), cmp_sym);

	/* the same function in both tables (or twice in one): keep the first, .symtab's */
	for (i = 0, n = 0; i < cc.n; i++) {
		if (n && cc.v[n - 1].value == cc.v[i].value &&
		    !strcmp(cc.v[n - 1].name, cc.v[i].name))
			continue;
		cc.v[n++] = cc.v[i];
	}
	e->funcs = cc.v;
	e->nr_funcs = n;
	e->funcs_built = true;
	return 0;
}

int up_sym_elf_for_each_func(struct up_sym_elf *e, up_sym_fn fn, void *ctx)
{
	size_t i;
	int ret;

	ret = build_funcs(e);
	if (ret)
		return ret;
	for (i = 0; i < e->nr_funcs; i++) {
		ret = fn(&e->funcs[i], ctx);
		if (ret)
			return ret;
	}
	return 0;
}

int up_sym_elf_enclosing_func(struct up_sym_elf *e, uint64_t vaddr, struct up_sym *out)
{
	const struct up_sym *best = NULL;
	size_t i;
	int err;

	err = build_funcs(e);
	if (err)
		return err;
	for (i = 0; i < e->nr_funcs && e->funcs[i].value <= vaddr; i++) {
		const struct up_sym *s = &e->funcs[i];

		if (vaddr - s->value >= s->size)
			continue;
		/* sorted by value: a later match starts at or after the best so far */
		if (!best || s->value > best->value || (s->global && !best->global))
			best = s;
	}
	if (!best)
		return -ENOENT;
	*out = *best;
	return 0;
}

/* ---- segments ---------------------------------------------------------------------- */

int up_sym_elf_vaddr_to_offset(struct up_sym_elf *e, uint64_t vaddr, uint64_t *offset)
{
	size_t i, n;

	if (elf_getphdrnum(e->elf, &n) != 0)
		return -ENOENT;
	for (i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(e->elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (vaddr < ph.p_vaddr || vaddr - ph.p_vaddr >= ph.p_filesz)
			continue;
		*offset = vaddr - ph.p_vaddr + ph.p_offset;
		return 0;
	}
	return -ENOENT;
}

int up_sym_elf_offset_to_vaddr(struct up_sym_elf *e, uint64_t offset, uint64_t *vaddr)
{
	size_t i, n;

	if (elf_getphdrnum(e->elf, &n) != 0)
		return -ENOENT;
	for (i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(e->elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (offset < ph.p_offset || offset - ph.p_offset >= ph.p_filesz)
			continue;
		*vaddr = offset - ph.p_offset + ph.p_vaddr;
		return 0;
	}
	return -ENOENT;
}
