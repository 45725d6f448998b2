// SPDX-License-Identifier: MIT
/*
 * The session's spec table: a spec parsed (trace/spec.h), its file resolved to a
 * (device, inode, offset), its filters (--filter, events/GRP/EVENT/filter), looked up
 * by index or by event, removed (its index stays, as a hole: probes and the mount hold
 * indexes).
 *
 * Specs are never moved nor freed before the session is (probes point at them).  It
 * never touches a process: where a change needs the probes placed again, arm.c does it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sym/file.h"
#include "sym/sym.h"
#include "trace/raw.h"
#include "trace/session_int.h"

/* A file target: the file's identity and the probed instruction's file offset. */
/* A file's probe refused before anything is written into a process: see sym/place.c. */
static int check_place(struct tspec *ts, struct up_sym_elf *elf, uint64_t vaddr, char *err,
		       size_t errlen)
{
	char why[384];
	int rc;

	rc = up_sym_elf_check_place(elf, vaddr, ts->spec.is_return, why, sizeof(why));
	if (rc)
		snprintf(err, errlen, "'%s': %s", ts->text, why);
	return rc;
}

/*
 * The ELF file of a spec's path, kept open for the next spec: a wildcard's thousands
 * of specs name one file, and opening it for each (its symbols read and sorted again)
 * made `p LIBC:*` take a minute.  Closed by up_trace_free, or for another file.
 */
static int spec_elf(struct up_trace *tr, const char *path, const struct stat *st,
		    struct up_sym_elf **out)
{
	int rc;

	if (tr->spec_elf && tr->spec_elf_dev == st->st_dev && tr->spec_elf_ino == st->st_ino &&
	    tr->spec_elf_mtime == st->st_mtime) {
		*out = tr->spec_elf;
		return 0;
	}
	up_sym_elf_close(tr->spec_elf);
	tr->spec_elf = NULL;
	rc = up_sym_elf_open(path, out);
	if (rc)
		return rc;
	tr->spec_elf = *out;
	tr->spec_elf_dev = st->st_dev;
	tr->spec_elf_ino = st->st_ino;
	tr->spec_elf_mtime = st->st_mtime;
	return 0;
}

static int resolve_file(struct up_trace *tr, struct tspec *ts, char *err, size_t errlen)
{
	struct up_sym_elf *elf;
	struct up_sym sym;
	struct stat st;
	uint64_t off;
	int rc;

	if (stat(ts->spec.path, &st) < 0) {
		rc = -errno;
		snprintf(err, errlen, "'%s': %s: %s", ts->text, ts->spec.path, strerror(-rc));
		return rc;
	}
	ts->dev = st.st_dev;
	ts->ino = st.st_ino;
	ts->is_file = true;
	if (ts->spec.target == UP_TARGET_OFFSET) {
		uint64_t vaddr;

		ts->file_off = ts->spec.offset;
		if (spec_elf(tr, ts->spec.path, &st, &elf))
			return 0; /* not an ELF file up_sym reads: the process's mapping decides */
		if (up_sym_elf_offset_to_vaddr(elf, ts->spec.offset, &vaddr)) {
			snprintf(err, errlen,
				 "'%s': offset 0x%" PRIx64 " is in no loaded segment of %s",
				 ts->text, ts->spec.offset, ts->spec.path);
			return -EINVAL;
		}
		return check_place(ts, elf, vaddr, err, errlen);
	}
	rc = spec_elf(tr, ts->spec.path, &st, &elf);
	if (rc) {
		snprintf(err, errlen, "'%s': %s: %s", ts->text, ts->spec.path,
			 rc == -ENOEXEC ? "not an x86 ELF file" : up_file_strerror(rc));
		return rc;
	}
	rc = up_sym_elf_lookup(elf, ts->spec.symbol, &sym);
	if (rc) {
		snprintf(err, errlen, "'%s': no function '%s' in %s (try: uprobe list %s)",
			 ts->text, ts->spec.symbol, ts->spec.path, ts->spec.path);
	} else {
		if (sym.ifunc)
			snprintf(err, errlen,
				 "'%s': note: %s is an IFUNC: this probes its resolver, which runs "
				 "once; probe the implementation it picks (uprobe list %s '*%s*')",
				 ts->text, ts->spec.symbol, ts->spec.path, ts->spec.symbol);
		rc = up_sym_elf_vaddr_to_offset(elf, sym.value + ts->spec.offset, &off);
		if (rc)
			snprintf(err, errlen, "'%s': %s+0x%" PRIx64 " is not in the file's loaded code",
				 ts->text, ts->spec.symbol, ts->spec.offset);
		else
			ts->file_off = off;
	}
	if (!rc)
		rc = check_place(ts, elf, sym.value + ts->spec.offset, err, errlen);
	return rc;
}

int up_trace_add(struct up_trace *tr, const char *text, char *err, size_t errlen)
{
	return tr_add_spec(tr, text, false, err, errlen);
}

int tr_add_spec(struct up_trace *tr, const char *text, bool internal, char *err, size_t errlen)
{
	struct tspec ts = { .internal = internal };
	struct up_spec_err se;
	int rc;

	err[0] = '\0';
	rc = up_spec_parse(text, &ts.spec, &se);
	if (rc) {
		if (rc == -EINVAL)
			up_spec_err_format(text, &se, err, errlen);
		else
			snprintf(err, errlen, "'%s': %s", text, strerror(-rc));
		return rc;
	}
	ts.text = strdup(text);
	if (!ts.text) {
		up_spec_free(&ts.spec);
		return -ENOMEM;
	}
	if (ts.spec.kind == UP_SPEC_EVENT && ts.spec.target != UP_TARGET_VADDR) {
		rc = resolve_file(tr, &ts, err, errlen);
		if (rc) {
			up_spec_free(&ts.spec);
			free(ts.text);
			return rc;
		}
		if (err[0])
			tr_log(tr, "%s", err); /* a note, not an error */
		err[0] = '\0';
	}
	if (tr->has_filter && !internal) {
		ts.filt = tr->filter;
		rc = ts.spec.kind == UP_SPEC_EVENT
			     ? up_filter_resolve(&ts.filt, &ts.spec, err, errlen)
			     : -EINVAL;
		if (rc == -EINVAL)
			snprintf(err, errlen, "'%s': --filter needs named arguments: p:/r: events "
					      "only", text);
		if (rc) {
			up_spec_free(&ts.spec);
			free(ts.text);
			return -EINVAL;
		}
		tr_filter_setup(&ts);
	}
	if (tr->opts.raw && ts.spec.kind == UP_SPEC_SEED) {
		snprintf(err, errlen, "'%s': --format raw records p:/r: events; the seed's "
				      "specs print as text or JSON only", text);
		up_spec_free(&ts.spec);
		free(ts.text);
		return -EINVAL;
	}
	if (ts.spec.kind == UP_SPEC_SEED)
		up_spec_format(&ts.spec, ts.label, sizeof(ts.label));
	else
		snprintf(ts.label, sizeof(ts.label), "%s/%s", ts.spec.group, ts.spec.event);
	{
		struct tspec **nv = realloc(tr->specs, (tr->nspecs + 1) * sizeof(*nv));
		struct tspec *heap = nv ? malloc(sizeof(*heap)) : NULL;

		if (nv)
			tr->specs = nv;
		/* every process's armed[] gets the new spec's entry */
		for (struct tproc *tp = tr->procs; heap && tp; tp = tp->next) {
			bool *a = realloc(tp->armed, (tr->nspecs + 1) * sizeof(*a));

			if (!a) {
				free(heap);
				heap = NULL;
				break;
			}
			a[tr->nspecs] = false;
			tp->armed = a;
		}
		if (!heap) {
			up_spec_free(&ts.spec);
			free(ts.text);
			return -ENOMEM;
		}
		ts.index = tr->nspecs;
		ts.enabled = true;
		*heap = ts;
		tr->specs[tr->nspecs++] = heap;
	}
	if (tr->opts.raw && !internal)
		tr_raw_check(tr, up_raw_write_event(tr->opts.out, ts.index, text));
	return 0;
}

int up_trace_set_filter(struct up_trace *tr, const char *text, char *err, size_t errlen)
{
	struct up_spec_err se;
	int rc = up_filter_parse(text, &tr->filter, &se);

	if (rc) {
		int n = snprintf(err, errlen, "--filter:\n");

		if (n > 0 && (size_t)n < errlen)
			up_spec_err_format(text, &se, err + n, errlen - (size_t)n);
		return rc;
	}
	tr->has_filter = tr->filter.n > 0;
	return 0;
}

unsigned up_trace_nspecs(const struct up_trace *tr)
{
	return tr->nspecs;
}

int up_trace_remove(struct up_trace *tr, unsigned i)
{
	if (i >= tr->nspecs || tr->specs[i]->removed)
		return -ENOENT;
	tr->specs[i]->removed = true;
	tr_disarm_spec(tr, i);
	return 0;
}

int up_trace_set_event_filter(struct up_trace *tr, unsigned i, const char *text, char *err,
			      size_t errlen)
{
	static struct up_filter f; /* 3.5 KiB: off the stack */
	struct up_spec_err se;
	struct tspec *ts;
	char *keep = NULL;
	int rc;

	err[0] = '\0';
	if (i >= tr->nspecs || tr->specs[i]->removed)
		return -ENOENT;
	ts = tr->specs[i];
	if (ts->spec.kind != UP_SPEC_EVENT) {
		snprintf(err, errlen, "'%s': a seed spec has no fields to filter on (p:/r: events "
				      "only)", ts->text);
		return -EINVAL;
	}
	memset(&f, 0, sizeof(f));
	if (text && *text && strcmp(text, "0")) {
		rc = up_filter_parse(text, &f, &se);
		if (rc) {
			if (rc == -EINVAL)
				up_spec_err_format(text, &se, err, errlen);
			return rc;
		}
		if (up_filter_resolve(&f, &ts->spec, err, errlen))
			return -EINVAL;
		keep = strdup(text);
		if (!keep)
			return -ENOMEM;
	}
	ts->filt = f;
	tr_filter_setup(ts);
	free(ts->filter_text);
	ts->filter_text = keep;
	tr_disarm_spec(tr, i); /* the fast path's agents take conditions when armed */
	up_trace_arm_all(tr, false);
	return 0;
}

const char *up_trace_event_filter(const struct up_trace *tr, unsigned i)
{
	return i < tr->nspecs ? tr->specs[i]->filter_text : NULL;
}

int up_trace_find(struct up_trace *tr, const char *group, const char *event)
{
	for (unsigned i = 0; i < tr->nspecs; i++) {
		const struct tspec *ts = tr->specs[i];

		if (ts->removed || ts->spec.kind != UP_SPEC_EVENT)
			continue;
		if ((!group || !strcmp(group, ts->spec.group)) && !strcmp(event, ts->spec.event))
			return (int)i;
	}
	return -ENOENT;
}

bool up_trace_spec_live(const struct up_trace *tr, unsigned i)
{
	return i < tr->nspecs && !tr->specs[i]->removed;
}

const struct up_spec *up_trace_spec(const struct up_trace *tr, unsigned i)
{
	return i < tr->nspecs ? &tr->specs[i]->spec : NULL;
}
