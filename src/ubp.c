// SPDX-License-Identifier: MIT
/*
 * User-space breakpoints (seed 002): one int3 over the first byte of an instruction,
 * the original byte kept so the instruction can be executed elsewhere and put back.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sym/file.h"
#include "sym/sym.h"
#include "ubp.h"

void up_ubp_files_clear(struct up_ubp_files *files)
{
	for (unsigned i = 0; i < files->n; i++)
		up_sym_elf_close(files->f[i].elf);
	free(files->fn.starts);
	memset(files, 0, sizeof(*files));
}

struct up_sym_elf *up_ubp_file(struct up_ubp_files *files, struct up_proc *p,
			       const struct up_map *m)
{
	struct up_file_map where = { up_proc_pid(p), m->start, m->end, m->ino };
	const char *path = m->path;
	struct up_sym_elf *elf;
	unsigned slot;

	for (unsigned i = 0; i < files->n; i++)
		if (files->f[i].ino == m->ino && !strcmp(files->f[i].path, path))
			return files->f[i].elf;
	if (up_sym_elf_open_map(path, &where, &elf))
		return NULL;
	if (files->n < sizeof(files->f) / sizeof(files->f[0])) {
		slot = files->n++;
	} else {
		slot = files->next++ % files->n;
		if (files->fn.elf == files->f[slot].elf) {
			free(files->fn.starts);
			memset(&files->fn, 0, sizeof(files->fn));
		}
		for (unsigned i = 0; i < sizeof(files->free_seen) / sizeof(files->free_seen[0]); i++)
			if (files->free_seen[i].elf == files->f[slot].elf)
				files->free_seen[i].elf = NULL;
		up_sym_elf_close(files->f[slot].elf);
	}
	snprintf(files->f[slot].path, sizeof(files->f[slot].path), "%s", path);
	files->f[slot].ino = m->ino;
	files->f[slot].elf = elf;
	return elf;
}

/*
 * Walks the enclosing function from its start in the file's bytes: 0 when vaddr (the
 * process's) falls on an instruction start or nothing is known, -EINVAL when it does
 * not, with the instruction it splits in msg.
 */
/*
 * The instruction starts of one function, decoded once: registering every
 * instruction of a big function must not decode it again from its start for each.
 * starts[i] holds the length of the instruction at offset i (0: not a start); a
 * decoder gap ends the map there (limit).
 */
static bool function_mapped(const struct up_ubp_files *files, const struct up_sym_elf *elf,
			    const struct up_sym *sym)
{
	const struct up_ubp_fn *fc = &files->fn;

	return fc->elf == elf && fc->start == sym->value && fc->size == sym->size;
}

static int function_map(struct up_ubp_files *files, struct up_sym_elf *elf,
			const struct up_sym *sym, const uint8_t *code)
{
	struct up_ubp_fn *fc = &files->fn;
	enum up_insn_mode mode = up_sym_elf_class(elf) == 32 ? UP_MODE_32 : UP_MODE_64;
	uint64_t at;

	if (function_mapped(files, elf, sym))
		return 0;
	free(fc->starts);
	memset(fc, 0, sizeof(*fc));
	fc->starts = calloc(sym->size, 1);
	if (!fc->starts)
		return -ENOMEM;
	fc->elf = elf;
	fc->start = sym->value;
	fc->size = sym->size;
	for (at = sym->value; at < sym->value + sym->size;) {
		unsigned len = up_insn_length(code + (at - sym->value), sym->size - (at - sym->value),
					      mode);

		if (!len)
			break; /* data in the function, or a decoder gap: cannot tell past it */
		fc->starts[at - sym->value] = (uint8_t)len;
		at += len;
	}
	fc->limit = at;
	return 0;
}

static int check_boundary(struct up_proc *p, struct up_ubp_files *files, const struct up_map *m,
			  uint64_t vaddr, char *msg, size_t msglen)
{
	struct up_sym_elf *elf;
	const uint8_t *code;
	struct up_sym sym;
	uint64_t fv, at;
	struct up_insn insn;
	char text[96];

	if (m->path[0] != '/')
		return 0;
	elf = up_ubp_file(files, p, m);
	if (!elf)
		return 0;
	if (up_sym_elf_offset_to_vaddr(elf, vaddr - m->start + m->offset, &fv))
		return 0;
	if (up_sym_elf_enclosing_code(elf, fv, &sym) || !sym.size)
		return 0;
	/* the function's bytes are looked up (a walk of the sections) only to map it */
	if (!function_mapped(files, elf, &sym) &&
	    (up_sym_elf_code(elf, sym.value, sym.size, &code) ||
	     function_map(files, elf, &sym, code)))
		return 0;
	if (fv >= files->fn.limit || files->fn.starts[fv - sym.value])
		return 0; /* a start, or past what could be decoded */
	if (up_sym_elf_code(elf, sym.value, sym.size, &code))
		return 0;
	for (at = fv; at > sym.value && !files->fn.starts[at - sym.value];)
		at--;
	up_insn_analyze(&insn, code + (at - sym.value), sym.size - (at - sym.value), at,
			up_sym_elf_class(elf) == 32 ? UP_MODE_32 : UP_MODE_64);
	if (!sym.unnamed)
		snprintf(msg, msglen,
			 "0x%" PRIx64 " is not an instruction boundary: it is inside %s+0x%" PRIx64
			 " (%u bytes: %s)",
			 vaddr, sym.name, at - sym.value, insn.length,
			 up_insn_format(&insn, text, sizeof(text)));
	else /* a function only its unwind information knows */
		snprintf(msg, msglen,
			 "0x%" PRIx64 " is not an instruction boundary: it is inside the "
			 "instruction at 0x%" PRIx64 " (%u bytes: %s)",
			 vaddr, vaddr - (fv - at), insn.length,
			 up_insn_format(&insn, text, sizeof(text)));
	return -EINVAL;
}

int up_ubp_prepare(struct up_proc *p, struct up_ubp_files *files, uint64_t vaddr,
		   struct up_ubp *b, char *msg, size_t msglen)
{
	uint8_t bytes[UP_INSN_MAX];
	struct up_map m;
	size_t n;
	int rc;

	memset(b, 0, sizeof(*b));
	b->vaddr = vaddr;
	if (files->map_proc == p && files->map_gen == files->gen && vaddr >= files->map.start &&
	    vaddr < files->map.end) {
		m = files->map;
	} else if (!up_proc_first_task(p)) {
		snprintf(msg, msglen, "process %d is exiting", (int)up_proc_pid(p));
		return -ESRCH;
	} else if ((rc = up_proc_find_map(p, vaddr, &m))) {
		if (rc == -ESRCH) {
			snprintf(msg, msglen, "process %d is exiting", (int)up_proc_pid(p));
			return -ESRCH;
		}
		snprintf(msg, msglen, "0x%" PRIx64 " is not mapped in process %d", vaddr,
			 (int)up_proc_pid(p));
		return -EINVAL;
	}
	files->map = m;
	files->map_proc = p;
	files->map_gen = files->gen;
	if (!m.x) {
		snprintf(msg, msglen, "0x%" PRIx64 " is not in executable memory (%s%s)", vaddr,
			 m.path[0] ? m.path : "anonymous", m.path[0] ? "" : " mapping");
		return -EINVAL;
	}
	n = m.end - vaddr < sizeof(bytes) ? m.end - vaddr : sizeof(bytes);
	rc = up_proc_read(p, vaddr, bytes, n);
	if (rc) {
		snprintf(msg, msglen, "cannot read the instruction at 0x%" PRIx64 ": %s", vaddr,
			 strerror(-rc));
		return rc;
	}
	if (bytes[0] == UP_BKPT_INSN) {
		snprintf(msg, msglen,
			 "an int3 is already at 0x%" PRIx64 " (the program's own, or another debugger's)",
			 vaddr);
		return -EEXIST;
	}
	rc = check_boundary(p, files, &m, vaddr, msg, msglen);
	if (rc)
		return rc;
	rc = up_insn_analyze(&b->insn, bytes, n, vaddr,
			     up_proc_mode(p) == 32 ? UP_MODE_32 : UP_MODE_64);
	if (rc)
		return rc;
	if (b->insn.plan == UP_PLAN_REJECT) {
		char text[96];

		if (b->insn.length)
			snprintf(msg, msglen, "cannot probe '%s' at 0x%" PRIx64 ": %s",
				 up_insn_format(&b->insn, text, sizeof(text)), vaddr,
				 up_insn_reason_str(b->insn.reason));
		else
			snprintf(msg, msglen, "cannot probe 0x%" PRIx64 ": %s", vaddr,
				 up_insn_reason_str(b->insn.reason));
		return -ENOTSUP;
	}
	b->orig = bytes[0];
	b->fresh = true;
	return 0;
}

int up_ubp_insert(struct up_proc *p, struct up_ubp *b)
{
	uint8_t cur, int3 = UP_BKPT_INSN;
	int rc;

	/* right after prepare the byte is known (one read less a probe: 10,000 in a batch) */
	if (!b->fresh) {
		rc = up_proc_read(p, b->vaddr, &cur, 1);
		if (rc)
			return rc;
		if (cur == UP_BKPT_INSN)
			return -EEXIST;
		b->orig = cur;
	}
	b->fresh = false;
	rc = up_proc_write_text(p, b->vaddr, &int3, 1);
	if (rc)
		return rc;
	b->inserted = true;
	return 0;
}

int up_ubp_verify(struct up_proc *p, const struct up_ubp *b)
{
	uint8_t cur;
	int rc = up_proc_read(p, b->vaddr, &cur, 1);

	if (rc)
		return rc;
	return b->inserted && cur == UP_BKPT_INSN;
}

int up_ubp_remove(struct up_proc *p, struct up_ubp *b)
{
	int rc = up_ubp_verify(p, b);

	if (rc < 0)
		return rc;
	if (rc == 0)
		return -EINVAL;
	rc = up_proc_write_text(p, b->vaddr, &b->orig, 1);
	if (rc)
		return rc;
	b->inserted = false;
	return 0;
}

/* ---- regions a jmp may cover (the fast path) ------------------------------------------ */

struct region {
	struct up_proc *p;    /* tables are read from the process; NULL: from elf */
	struct up_sym_elf *elf;
	uint64_t bias;	      /* process address - file address */
	uint64_t flo, fhi;    /* the region, file addresses: nothing may arrive in (flo, fhi) */
	uint64_t fstart, fend; /* the function */
	char *why;
	size_t whylen;
};

static bool inside(const struct region *r, uint64_t fv)
{
	return fv > r->flo && fv < r->fhi;
}

/* A jump table at file address table: entries while they land in the function. */
static int scan_table(struct region *r, uint64_t table, unsigned width)
{
	for (unsigned k = 0; k < 4096; k++) {
		uint64_t at = table + (uint64_t)k * width, fv = 0;

		if (r->p ? up_proc_read(r->p, r->bias + at, &fv, width)
			 : up_sym_elf_read(r->elf, at, &fv, width))
			return 0; /* the table ends at unreadable memory */
		if (width == 4)
			fv = table + (uint64_t)(int64_t)(int32_t)(uint32_t)fv;
		else
			fv -= r->bias;
		if (fv < r->fstart || fv >= r->fend)
			return 0;
		if (inside(r, fv)) {
			snprintf(r->why, r->whylen,
				 "a jump table entry targets 0x%" PRIx64 ", inside the bytes the jmp "
				 "would cover",
				 fv + r->bias);
			return -ENOTSUP;
		}
	}
	return 0;
}

/* Every instruction of [start, start + size) (file addresses, code at code). */
static int scan_code(struct region *r, const uint8_t *code, uint64_t start, uint64_t size,
		     enum up_insn_mode mode, bool tables)
{
	struct up_insn *insn = malloc(sizeof(*insn));
	unsigned ntables = 0, nindirect = 0;
	int rc = 0;

	if (!insn)
		return -ENOMEM;
	for (uint64_t at = start; at < start + size && !rc;) {
		up_insn_analyze(insn, code + (at - start), start + size - at, at, mode);
		if (!insn->length) {
			snprintf(r->why, r->whylen, "the function cannot be decoded whole");
			rc = -ENOTSUP;
			break;
		}
		if (insn->is_branch_rel && inside(r, insn->target)) {
			snprintf(r->why, r->whylen,
				 "a branch at 0x%" PRIx64 " targets 0x%" PRIx64
				 ", inside the bytes the jmp would cover",
				 at + r->bias, insn->target + r->bias);
			rc = -ENOTSUP;
		} else if (tables && insn->rip_relative && insn->mnemonic == ZYDIS_MNEMONIC_LEA &&
			   (insn->target < r->fstart || insn->target >= r->fend)) {
			/* a rip-relative base outside the code: perhaps a table of offsets */
			ntables++;
			rc = scan_table(r, insn->target, 4);
		} else if (insn->emu == UP_EMU_JMP_IND) {
			const struct up_insn_op *o = &insn->op0;

			nindirect++;
			if (tables && o->type == ZYDIS_OPERAND_TYPE_MEMORY &&
			    o->base == ZYDIS_REGISTER_NONE && o->scale == 8 && o->has_disp) {
				ntables++;
				rc = scan_table(r, (uint64_t)o->disp, 8);
			}
		}
		at += insn->length;
	}
	free(insn);
	if (!rc && tables && nindirect && !ntables) {
		snprintf(r->why, r->whylen, "an indirect jmp whose targets cannot be found");
		rc = -ENOTSUP;
	}
	return rc;
}

/*
 * Every direct branch target of the file (jmp, jcc, call), decoded once through its
 * executable sections and kept with the file: a function may be entered in the middle
 * from another (glibc's mempcpy jumps into memmove past its first instruction), which
 * a scan of the enclosing function alone does not see.
 */
struct targets {
	uint64_t *v;
	size_t n, cap;
	enum up_insn_mode mode;
};

static void targets_free(void *p)
{
	struct targets *t = p;

	if (t)
		free(t->v);
	free(t);
}

static int targets_section(const struct up_sym_section *sec, void *ctx)
{
	struct targets *t = ctx;
	struct up_insn insn;

	for (uint64_t off = 0; off < sec->size;) {
		up_insn_analyze(&insn, sec->data + off, sec->size - off, sec->vaddr + off, t->mode);
		if (insn.is_branch_rel) {
			if (t->n == t->cap) {
				size_t cap = t->cap ? 2 * t->cap : 4096;
				uint64_t *v = realloc(t->v, cap * sizeof(*v));

				if (!v)
					return -ENOMEM;
				t->v = v;
				t->cap = cap;
			}
			t->v[t->n++] = insn.target;
		}
		off += insn.length ? insn.length : 1;
	}
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static const struct targets *file_targets(struct up_sym_elf *elf)
{
	struct targets *t = up_sym_elf_cache(elf);

	if (t)
		return t;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->mode = up_sym_elf_class(elf) == 32 ? UP_MODE_32 : UP_MODE_64;
	if (up_sym_elf_for_each_exec_section(elf, targets_section, t)) {
		targets_free(t);
		return NULL;
	}
	qsort(t->v, t->n, sizeof(*t->v), cmp_u64);
	up_sym_elf_set_cache(elf, t, targets_free);
	return t;
}

/* A direct branch anywhere in the file into (r->flo, r->fhi)? */
static int region_file_targets(struct region *r, struct up_sym_elf *elf)
{
	const struct targets *t = file_targets(elf);
	size_t lo = 0, hi;

	if (!t) {
		snprintf(r->why, r->whylen, "the file's branches cannot be indexed");
		return -ENOTSUP;
	}
	for (hi = t->n; lo < hi;) { /* the first target above flo */
		size_t mid = lo + (hi - lo) / 2;

		if (t->v[mid] <= r->flo)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < t->n && t->v[lo] < r->fhi) {
		snprintf(r->why, r->whylen, "a branch elsewhere in the file targets 0x%" PRIx64
			 ", inside the bytes the jmp would cover", t->v[lo] + r->bias);
		return -ENOTSUP;
	}
	return 0;
}

/* r's file range against sym's code (and its .cold part's): nothing may arrive inside. */
static int region_scan(struct region *r, struct up_sym_elf *elf, const struct up_sym *sym)
{
	const uint8_t *code;
	struct up_sym cold;
	enum up_insn_mode mode = up_sym_elf_class(elf) == 32 ? UP_MODE_32 : UP_MODE_64;
	char name[256];
	int rc;

	if (r->fhi > sym->value + sym->size) {
		snprintf(r->why, r->whylen, "the jmp would reach past the end of %s", sym->name);
		return -ENOTSUP;
	}
	if (up_sym_elf_code(elf, sym->value, sym->size, &code)) {
		snprintf(r->why, r->whylen, "the code of %s cannot be read from its file", sym->name);
		return -ENOTSUP;
	}
	r->fstart = sym->value;
	r->fend = sym->value + sym->size;
	rc = scan_code(r, code, sym->value, sym->size, mode, true);
	if (rc)
		return rc;
	/* gcc's split-off cold part jumps back into the function */
	snprintf(name, sizeof(name), "%s.cold", sym->name);
	if (!up_sym_elf_lookup(elf, name, &cold) && cold.size &&
	    !up_sym_elf_code(elf, cold.value, cold.size, &code))
		rc = scan_code(r, code, cold.value, cold.size, mode, false);
	return rc ? rc : region_file_targets(r, elf);
}

int up_ubp_region_free(struct up_proc *p, struct up_ubp_files *files, uint64_t lo, uint64_t hi,
		       char *why, size_t whylen)
{
	struct up_sym_elf *elf;
	struct up_sym sym;
	struct up_map m;
	struct region r = { .p = p, .why = why, .whylen = whylen };
	const unsigned nseen = sizeof(files->free_seen) / sizeof(files->free_seen[0]);
	uint64_t fv;
	int rc;

	if (up_proc_find_map(p, lo, &m) || m.path[0] != '/' || !(elf = up_ubp_file(files, p, &m)) ||
	    up_sym_elf_offset_to_vaddr(elf, lo - m.start + m.offset, &fv) ||
	    up_sym_elf_enclosing_code(elf, fv, &sym) || !sym.size) {
		snprintf(why, whylen, "no symbol for the enclosing function, so its branches "
				      "cannot be checked");
		return -ENOTSUP;
	}
	r.elf = elf;
	r.bias = lo - fv;
	r.flo = fv;
	r.fhi = fv + (hi - lo);
	/* found free before in the same file: its code and branches are the file's (a
	   jump table is read from the process, relocated; one the process rewrote would
	   only lead its own threads astray) */
	for (unsigned i = 0; i < nseen; i++)
		if (files->free_seen[i].elf == elf && files->free_seen[i].flo == r.flo &&
		    files->free_seen[i].fhi == r.fhi)
			return 0;
	rc = region_scan(&r, elf, &sym);
	if (!rc) {
		unsigned i = files->free_next++ % nseen;

		files->free_seen[i].elf = elf;
		files->free_seen[i].flo = r.flo;
		files->free_seen[i].fhi = r.fhi;
	}
	return rc;
}

int up_ubp_region_free_file(struct up_sym_elf *elf, uint64_t lo, uint64_t hi, char *why,
			    size_t whylen)
{
	struct region r = { .elf = elf, .why = why, .whylen = whylen, .flo = lo, .fhi = hi };
	struct up_sym sym;

	if (up_sym_elf_enclosing_code(elf, lo, &sym) || !sym.size) {
		snprintf(why, whylen, "no symbol for the enclosing function, so its branches "
				      "cannot be checked");
		return -ENOTSUP;
	}
	return region_scan(&r, elf, &sym);
}
