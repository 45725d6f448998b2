// SPDX-License-Identifier: MIT
/*
 * The ELF reader (libelf).  It owns the open file and the mapping the section bytes and
 * symbol names point into, and a lazily built, address-sorted table of the function
 * symbols.  It must never print or exit, and never write to the file.
 *
 * A stripped file (no .symtab) gets its symbols from a separate debug file found as gdb
 * finds one: by build-id under <root>/.build-id/, then through .gnu_debuglink next to
 * the file, in its .debug/ and under <root>/<its directory>/ (roots: /usr/lib/debug, or
 * UPROBE_DEBUG_DIRS).  Only the debug file's .symtab is used; code bytes and segments
 * always come from the main file, the debug file's code sections being SHT_NOBITS.
 */
#include "sym/fde.h"
#include "sym/sym.h"

#include "sym/file.h"

#include <errno.h>
#include <fcntl.h>
#include <elfutils/libdw.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_DEBUG_ROOT "/usr/lib/debug"

struct up_sym_elf {
	char *path;
	int fd;
	Elf *elf;
	int elf_class;
	unsigned machine;
	unsigned type;
	size_t shstrndx;
	/* the separate debug file whose .symtab stands in for the missing one, if any */
	char *debug_path;
	int debug_fd;
	Elf *debug_elf;
	/* function symbols sorted by (value, name, dynamic); built on first use */
	struct up_sym *funcs;
	size_t nr_funcs;
	bool funcs_built;
	/* a user's derived data (up_sym_elf_set_cache), released with the file */
	void *cache;
	void (*cache_free)(void *);
	/* .eh_frame's FDEs (sym/fde.c): functions the symbols do not name; built on
	   first use */
	struct up_fde *fdes;
	size_t nr_fdes;
	bool fdes_built;
};

/* Opens path (where map says a process maps it, if map) through up_file_open(). */
static int elf_open_raw(const char *path, const struct up_file_map *map, int *fdp, Elf **elfp)
{
	Elf *elf;
	int fd;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOSYS;

	fd = up_file_open(path, map, true);
	if (fd < 0)
		return fd;

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

	err = elf_open_raw(path, NULL, &fd, &elf);
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

/* ---- separate debug files --------------------------------------------------------- */

static bool has_section_type(Elf *elf, Elf64_Word sh_type)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr shdr;

	while ((scn = elf_nextscn(elf, scn)))
		if (gelf_getshdr(scn, &shdr) && shdr.sh_type == sh_type && shdr.sh_size)
			return true;
	return false;
}

/* The NT_GNU_BUILD_ID descriptor in data (notes), or false. */
static bool build_id_in_notes(Elf_Data *data, const uint8_t **id, size_t *len)
{
	size_t off = 0, name_off, desc_off;
	GElf_Nhdr nh;

	while (off < data->d_size &&
	       (off = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
		const char *name = (const char *)data->d_buf + name_off;

		if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && !memcmp(name, "GNU", 4) &&
		    nh.n_descsz) {
			*id = (const uint8_t *)data->d_buf + desc_off;
			*len = nh.n_descsz;
			return true;
		}
	}
	return false;
}

/* The file's build-id: from its SHT_NOTE sections, else from its PT_NOTE segments. */
static bool elf_build_id(Elf *elf, const uint8_t **id, size_t *len)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr shdr;
	size_t i, n;

	while ((scn = elf_nextscn(elf, scn))) {
		Elf_Data *data;

		if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_NOTE)
			continue;
		data = elf_getdata(scn, NULL);
		if (data && data->d_buf && build_id_in_notes(data, id, len))
			return true;
	}
	if (elf_getphdrnum(elf, &n) != 0)
		return false;
	for (i = 0; i < n; i++) {
		GElf_Phdr ph;
		Elf_Data *data;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_NOTE || !ph.p_filesz)
			continue;
		data = elf_getdata_rawchunk(elf, (int64_t)ph.p_offset, ph.p_filesz, ELF_T_NHDR);
		if (data && data->d_buf && build_id_in_notes(data, id, len))
			return true;
	}
	return false;
}

/* .gnu_debuglink: a NUL-terminated file name, padding to 4, a CRC32 in file byte order. */
static bool elf_debuglink(Elf *elf, size_t shstrndx, const char **name, uint32_t *crc)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr shdr;

	while ((scn = elf_nextscn(elf, scn))) {
		const char *sname;
		const uint8_t *p;
		Elf_Data *data;
		size_t len, at;
		char *ident;

		if (!gelf_getshdr(scn, &shdr) || shdr.sh_type == SHT_NOBITS)
			continue;
		sname = elf_strptr(elf, shstrndx, shdr.sh_name);
		if (!sname || strcmp(sname, ".gnu_debuglink"))
			continue;
		data = elf_getdata(scn, NULL);
		if (!data || !data->d_buf)
			return false;
		p = data->d_buf;
		len = strnlen((const char *)p, data->d_size);
		at = (len + 4) & ~(size_t)3;
		if (!len || len == data->d_size || at + 4 > data->d_size)
			return false;
		ident = elf_getident(elf, NULL);
		if (ident && ident[EI_DATA] == ELFDATA2MSB)
			*crc = (uint32_t)p[at] << 24 | (uint32_t)p[at + 1] << 16 |
			       (uint32_t)p[at + 2] << 8 | p[at + 3];
		else
			*crc = (uint32_t)p[at + 3] << 24 | (uint32_t)p[at + 2] << 16 |
			       (uint32_t)p[at + 1] << 8 | p[at];
		*name = (const char *)p;
		return true;
	}
	return false;
}

/*
 * The CRC-32 of the whole file, as binutils' bfd_calc_gnu_debuglink_crc32 computes it
 * (the zlib/IEEE 802.3 one: reflected polynomial 0xedb88320, ~0 in and out).
 */
static int file_crc32(int fd, uint32_t *out)
{
	static uint32_t table[256];
	static bool have_table;
	uint8_t buf[65536];
	uint32_t crc = 0xffffffffu;
	struct stat st;
	off_t off = 0;
	ssize_t n;

	/* the size it had when opened (up_file_open bounds it): a file the process keeps
	   extending must not keep this loop going */
	if (fstat(fd, &st) < 0)
		return -errno;

	if (!have_table) {
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t c = i;

			for (int k = 0; k < 8; k++)
				c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
			table[i] = c;
		}
		have_table = true;
	}
	while (off < st.st_size) {
		size_t want = st.st_size - off < (off_t)sizeof(buf) ? (size_t)(st.st_size - off) :
								      sizeof(buf);

		n = pread(fd, buf, want, off);
		if (!n)
			break;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		for (ssize_t i = 0; i < n; i++)
			crc = table[(crc ^ buf[i]) & 0xff] ^ (crc >> 8);
		off += n;
	}
	*out = ~crc;
	return 0;
}

struct debug_want {
	const uint8_t *id; /* the main file's build-id, or NULL */
	size_t id_len;
	bool id_required;  /* found by build-id: the debug file must carry the same one */
	bool check_crc;	   /* found by .gnu_debuglink: the file's CRC must be crc */
	uint32_t crc;
};

/* Takes path as the debug file when it is one for e; false when it is not. */
static bool try_debug_file(struct up_sym_elf *e, const char *path, const struct debug_want *w)
{
	struct stat main_st, st;
	const uint8_t *id;
	GElf_Ehdr ehdr;
	size_t id_len;
	uint32_t crc;
	Elf *elf;
	int fd;

	if (elf_open_raw(path, NULL, &fd, &elf))
		return false;
	/* a debuglink naming the file itself (or a hard link to it) */
	if (fstat(fd, &st) || fstat(e->fd, &main_st) ||
	    (st.st_dev == main_st.st_dev && st.st_ino == main_st.st_ino))
		goto reject;
	if (!gelf_getehdr(elf, &ehdr) || ehdr.e_machine != e->machine ||
	    gelf_getclass(elf) != (e->elf_class == 32 ? ELFCLASS32 : ELFCLASS64))
		goto reject;
	if (elf_build_id(elf, &id, &id_len)) {
		if (w->id && (id_len != w->id_len || memcmp(id, w->id, id_len)))
			goto reject;
	} else if (w->id_required) {
		goto reject;
	}
	if (w->check_crc && (file_crc32(fd, &crc) || crc != w->crc))
		goto reject;
	if (!has_section_type(elf, SHT_SYMTAB))
		goto reject;

	e->debug_path = strdup(path);
	if (!e->debug_path)
		goto reject;
	e->debug_fd = fd;
	e->debug_elf = elf;
	return true;

reject:
	elf_end(elf);
	close(fd);
	return false;
}

/* Calls try_debug_file on root + "/" + rest for each debug root; true when one takes. */
static bool try_roots(struct up_sym_elf *e, const char *rest, const struct debug_want *w)
{
	const char *roots = getenv("UPROBE_DEBUG_DIRS");
	char path[PATH_MAX];

	if (!roots)
		roots = DEFAULT_DEBUG_ROOT;
	while (*roots) {
		size_t len = strcspn(roots, ":");
		int n;

		if (len) {
			n = snprintf(path, sizeof(path), "%.*s/%s", (int)len, roots,
				     rest[0] == '/' ? rest + 1 : rest);
			if (n > 0 && (size_t)n < sizeof(path) && try_debug_file(e, path, w))
				return true;
		}
		roots += len;
		if (*roots == ':')
			roots++;
	}
	return false;
}

/* The debuglink places gdb looks in for a file in dir: dir, dir/.debug, <root>/dir. */
static bool try_debuglink_dir(struct up_sym_elf *e, const char *dir, const char *name,
			      const struct debug_want *w)
{
	char path[PATH_MAX];
	int n;

	n = snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (n > 0 && (size_t)n < sizeof(path) && try_debug_file(e, path, w))
		return true;
	n = snprintf(path, sizeof(path), "%s/.debug/%s", dir, name);
	if (n > 0 && (size_t)n < sizeof(path) && try_debug_file(e, path, w))
		return true;
	n = snprintf(path, sizeof(path), "%s/%s", dir, name);
	return n > 0 && (size_t)n < sizeof(path) && try_roots(e, path, w);
}

/* The directory part of path ("/" for "/x"), made absolute against the cwd. */
static bool abs_dirname(const char *path, char *dir, size_t size)
{
	const char *slash = strrchr(path, '/');
	size_t len;
	int n;

	if (path[0] == '/') {
		len = slash == path ? 1 : (size_t)(slash - path);
		if (len >= size)
			return false;
		memcpy(dir, path, len);
		dir[len] = '\0';
		return true;
	}
	if (!getcwd(dir, size))
		return false;
	if (!slash)
		return true;
	len = strlen(dir);
	n = snprintf(dir + len, size - len, "/%.*s", (int)(slash - path), path);
	return n > 0 && (size_t)n < size - len;
}

static void find_debug_file(struct up_sym_elf *e)
{
	struct debug_want w = { 0 };
	char rest[64 + 2 * 256], dir[PATH_MAX], real_dir[PATH_MAX], *real;
	const char *name;
	size_t i;

	if (elf_build_id(e->elf, &w.id, &w.id_len) && w.id_len >= 2 && w.id_len <= 256) {
		int n = snprintf(rest, sizeof(rest), ".build-id/%02x/", w.id[0]);

		for (i = 1; i < w.id_len; i++)
			n += snprintf(rest + n, sizeof(rest) - (size_t)n, "%02x", w.id[i]);
		snprintf(rest + n, sizeof(rest) - (size_t)n, ".debug");
		w.id_required = true;
		if (try_roots(e, rest, &w))
			return;
		w.id_required = false;
	}

	if (!elf_debuglink(e->elf, e->shstrndx, &name, &w.crc))
		return;
	w.check_crc = true;
	/* the file's own directory, then the one it really is in when a symlink leads there */
	if (abs_dirname(e->path, dir, sizeof(dir)) && try_debuglink_dir(e, dir, name, &w))
		return;
	real = realpath(e->path, NULL);
	if (!real)
		return;
	if (abs_dirname(real, real_dir, sizeof(real_dir)) && strcmp(real_dir, dir))
		try_debuglink_dir(e, real_dir, name, &w);
	free(real);
}

int up_sym_elf_open(const char *path, struct up_sym_elf **out)
{
	return up_sym_elf_open_map(path, NULL, out);
}

int up_sym_elf_open_map(const char *path, const struct up_file_map *map, struct up_sym_elf **out)
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

	err = elf_open_raw(path, map, &e->fd, &e->elf);
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
	e->debug_fd = -1;
	/* a debug file is a bonus: not finding one (or not finding memory for it) is no error */
	if (!has_section_type(e->elf, SHT_SYMTAB))
		find_debug_file(e);
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

void *up_sym_elf_cache(const struct up_sym_elf *e)
{
	return e->cache;
}

void up_sym_elf_set_cache(struct up_sym_elf *e, void *data, void (*release)(void *))
{
	if (e->cache && e->cache_free)
		e->cache_free(e->cache);
	e->cache = data;
	e->cache_free = release;
}

void up_sym_elf_close(struct up_sym_elf *e)
{
	if (!e)
		return;
	if (e->cache && e->cache_free)
		e->cache_free(e->cache);
	free(e->fdes);
	free(e->funcs);
	elf_end(e->debug_elf);
	if (e->debug_fd >= 0)
		close(e->debug_fd);
	free(e->debug_path);
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

const char *up_sym_elf_debug_path(const struct up_sym_elf *e)
{
	return e->debug_path;
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

/*
 * Calls fn(sym, ctx) for each defined function symbol (data symbol: objects) of a
 * table (SHT_SYMTAB/DYNSYM) of elf: the main file's, or the debug file's (from_debug).
 */
static int scan_table(Elf *elf, bool from_debug, Elf64_Word sh_type, bool objects,
		      int (*fn)(const struct up_sym *sym, void *ctx), void *ctx)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr shdr;
	int ret;

	while ((scn = elf_nextscn(elf, scn))) {
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
			if (objects ? type != STT_OBJECT : type != STT_FUNC && type != STT_GNU_IFUNC)
				continue;
			if (sym.st_shndx == SHN_UNDEF)
				continue;
			s.name = elf_strptr(elf, shdr.sh_link, sym.st_name);
			if (!s.name || !*s.name)
				continue;
			s.value = sym.st_value;
			s.size = sym.st_size;
			s.global = bind == STB_GLOBAL || bind == STB_WEAK || bind == STB_GNU_UNIQUE;
			s.ifunc = type == STT_GNU_IFUNC;
			s.dynamic = sh_type == SHT_DYNSYM;
			s.debug_file = from_debug;
			ret = fn(&s, ctx);
			if (ret)
				return ret;
		}
	}
	return 0;
}

/*
 * The function symbols in lookup order: .symtab, the debug file's .symtab (which is
 * there only when the file has none), .dynsym.
 */
static int scan_symtab(struct up_sym_elf *e, bool objects,
		       int (*fn)(const struct up_sym *sym, void *ctx), void *ctx)
{
	int ret;

	ret = scan_table(e->elf, false, SHT_SYMTAB, objects, fn, ctx);
	if (!ret && e->debug_elf)
		ret = scan_table(e->debug_elf, true, SHT_SYMTAB, objects, fn, ctx);
	if (!ret)
		ret = scan_table(e->elf, false, SHT_DYNSYM, objects, fn, ctx);
	return ret;
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

	if (scan_symtab(e, false, lookup_one, &lc) > 0)
		return 0;
	return -ENOENT;
}

int up_sym_elf_lookup_object(struct up_sym_elf *e, const char *name, struct up_sym *out)
{
	struct lookup_ctx lc = { .name = name, .out = out };

	if (scan_symtab(e, true, lookup_one, &lc) > 0)
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
	err = scan_symtab(e, false, collect_one, &cc);
	if (err) {
		free(cc.v);
		return err;
	}
	if (cc.n)
		qsort(cc.v, cc.n, sizeof(*cc.v), cmp_sym);

	/* the same function in two tables (or twice in one): keep the first, a .symtab's */
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

bool up_sym_elf_full_symbols(const struct up_sym_elf *e)
{
	return e->debug_elf || has_section_type(e->elf, SHT_SYMTAB);
}

static const struct up_fde *fde_of(struct up_sym_elf *e, uint64_t vaddr)
{
	if (!e->fdes_built) {
		e->fdes_built = true;
		if (up_fde_table(e->elf, &e->fdes, &e->nr_fdes))
			e->nr_fdes = 0;
	}
	return up_fde_find(e->fdes, e->nr_fdes, vaddr);
}

int up_sym_elf_enclosing_code(struct up_sym_elf *e, uint64_t vaddr, struct up_sym *out)
{
	const struct up_fde *f;
	int rc = up_sym_elf_enclosing_func(e, vaddr, out);

	if (rc != -ENOENT)
		return rc;
	f = fde_of(e, vaddr);
	if (!f)
		return -ENOENT;
	memset(out, 0, sizeof(*out));
	out->name = "a function without a symbol";
	out->unnamed = true;
	out->value = f->start;
	out->size = f->end - f->start;
	/*
	 * A symbol of no size inside the FDE's range begins the code the FDE describes:
	 * glibc's __restore_rt has an FDE that starts one byte early (the last byte of the
	 * padding before it, for unwinders that look up a return address less one), so
	 * decoding from the FDE's start would misjudge every instruction of it.
	 */
	for (size_t i = 0; i < e->nr_funcs && e->funcs[i].value <= vaddr; i++) {
		const struct up_sym *s = &e->funcs[i];

		if (s->size || s->value <= f->start)
			continue;
		*out = *s;
		out->size = f->end - s->value;
	}
	return 0;
}

int up_sym_elf_func_entry(struct up_sym_elf *e, uint64_t vaddr, struct up_sym *out)
{
	const struct up_sym *best = NULL;
	const struct up_fde *f;
	int rc;

	rc = build_funcs(e);
	if (rc)
		return rc;
	for (size_t i = 0; i < e->nr_funcs && e->funcs[i].value <= vaddr; i++) {
		const struct up_sym *s = &e->funcs[i];

		if (s->value == vaddr && (!best || (s->global && !best->global)))
			best = s;
	}
	if (best) {
		*out = *best;
		return 0;
	}
	f = fde_of(e, vaddr);
	if (!f || f->start != vaddr)
		return -ENOENT;
	memset(out, 0, sizeof(*out));
	out->name = "a function without a symbol";
	out->unnamed = true;
	out->value = f->start;
	out->size = f->end - f->start;
	return 0;
}

/* ---- segments ---------------------------------------------------------------------- */

/* The PT_LOAD whose bytes from the file hold vaddr. */
static int load_of(struct up_sym_elf *e, uint64_t vaddr, GElf_Phdr *ph)
{
	size_t n;

	if (elf_getphdrnum(e->elf, &n) != 0)
		return -ENOENT;
	for (size_t i = 0; i < n; i++) {
		if (!gelf_getphdr(e->elf, (int)i, ph) || ph->p_type != PT_LOAD)
			continue;
		if (vaddr >= ph->p_vaddr && vaddr - ph->p_vaddr < ph->p_filesz)
			return 0;
	}
	return -ENOENT;
}

int up_sym_elf_vaddr_to_offset(struct up_sym_elf *e, uint64_t vaddr, uint64_t *offset)
{
	GElf_Phdr ph;

	if (load_of(e, vaddr, &ph))
		return -ENOENT;
	*offset = vaddr - ph.p_vaddr + ph.p_offset;
	return 0;
}

int up_sym_elf_read(struct up_sym_elf *e, uint64_t vaddr, void *buf, size_t len)
{
	GElf_Phdr ph;

	if (load_of(e, vaddr, &ph) || len > ph.p_filesz - (vaddr - ph.p_vaddr))
		return -ENOENT;
	return pread(e->fd, buf, len, (off_t)(vaddr - ph.p_vaddr + ph.p_offset)) == (ssize_t)len
		       ? 0
		       : -EIO;
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

/* ---- needed libraries ---------------------------------------------------------------------- */

/* dir/name when it is a file of the same class; $ORIGIN in dir is the file's directory. */
static bool lib_in(const struct up_sym_elf *e, const char *dir, size_t dlen, const char *name,
		   char *out, size_t size)
{
	char origin[PATH_MAX], d[PATH_MAX];
	int cls;

	if (dlen >= 7 && !strncmp(dir, "$ORIGIN", 7)) {
		if (!abs_dirname(e->path, origin, sizeof(origin)))
			return false;
		if ((size_t)snprintf(d, sizeof(d), "%s%.*s", origin, (int)(dlen - 7), dir + 7) >=
		    sizeof(d))
			return false;
	} else {
		snprintf(d, sizeof(d), "%.*s", (int)dlen, dir);
	}
	if ((size_t)snprintf(out, size, "%s/%s", d, name) >= size)
		return false;
	return up_sym_elf_identify(out, &cls, NULL) == 0 && cls == e->elf_class;
}

int up_sym_elf_for_each_needed(struct up_sym_elf *e, up_sym_path_fn fn, void *ctx)
{
	static const char *const sys64[] = { "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
					     "/lib64", "/usr/lib64", "/lib", "/usr/lib",
					     "/usr/local/lib", NULL };
	static const char *const sys32[] = { "/lib/i386-linux-gnu", "/usr/lib/i386-linux-gnu",
					     "/lib32", "/usr/lib32", "/lib", "/usr/lib",
					     "/usr/local/lib", NULL };
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	Elf_Data *data = NULL;
	const char *runpath = NULL, *rpath = NULL;
	size_t n;
	int rc = 0;

	while ((scn = elf_nextscn(e->elf, scn)))
		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_DYNAMIC)
			break;
	if (!scn || !(data = elf_getdata(scn, NULL)) || !sh.sh_entsize)
		return 0; /* static, or not linked: nothing needed */
	n = sh.sh_size / sh.sh_entsize;
	for (size_t i = 0; i < n; i++) {
		GElf_Dyn dyn;

		if (!gelf_getdyn(data, (int)i, &dyn))
			continue;
		if (dyn.d_tag == DT_RUNPATH)
			runpath = elf_strptr(e->elf, sh.sh_link, dyn.d_un.d_val);
		else if (dyn.d_tag == DT_RPATH)
			rpath = elf_strptr(e->elf, sh.sh_link, dyn.d_un.d_val);
	}
	if (runpath)
		rpath = NULL; /* DT_RUNPATH makes the linker ignore DT_RPATH */
	for (size_t i = 0; i < n && !rc; i++) {
		const char *dirs = runpath ? runpath : rpath, *name;
		const char *const *sys = e->elf_class == 32 ? sys32 : sys64;
		char path[PATH_MAX];
		bool found = false;
		GElf_Dyn dyn;

		if (!gelf_getdyn(data, (int)i, &dyn) || dyn.d_tag != DT_NEEDED)
			continue;
		name = elf_strptr(e->elf, sh.sh_link, dyn.d_un.d_val);
		if (!name)
			continue;
		if (strchr(name, '/')) { /* a path: taken as it is, no search */
			int cls;

			snprintf(path, sizeof(path), "%s", name);
			found = up_sym_elf_identify(path, &cls, NULL) == 0 && cls == e->elf_class;
			dirs = NULL;
			if (!found)
				continue;
		}
		while (!found && dirs && *dirs) {
			size_t len = strcspn(dirs, ":");

			found = len && lib_in(e, dirs, len, name, path, sizeof(path));
			dirs += len + (dirs[len] == ':');
		}
		for (; !found && *sys; sys++)
			found = lib_in(e, *sys, strlen(*sys), name, path, sizeof(path));
		if (found)
			rc = fn(ctx, path);
	}
	return rc;
}
