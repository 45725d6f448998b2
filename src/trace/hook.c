// SPDX-License-Identifier: MIT
/*
 * Hits handed to a caller (up_trace_set_hit_fn): `uprobe run` interprets a bpftrace
 * program's body at each hit.  The caller runs while the hit's thread is stopped, with
 * its registers and a reader of its memory; its stack and the names of its addresses
 * come from the session's per-process caches (the unwind tables, the ELF symbols).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sym/sym.h"
#include "trace/session_int.h"

struct hook_priv {
	struct tprobe *p;
	bool at_entry;
	const struct up_fetch_env *env;
};

int up_trace_set_hit_fn(struct up_trace *tr, unsigned i, up_trace_hit_fn fn, void *arg)
{
	if (i >= tr->nspecs || tr->specs[i]->removed)
		return -ENOENT;
	tr->specs[i]->hit_fn = fn;
	tr->specs[i]->hit_arg = arg;
	return 0;
}

void tr_hook_hit(struct tprobe *p, uprobe_regs_t *regs, bool is_return, const struct hit *h,
		 struct up_fetch_env *env)
{
	struct hook_priv hp = { .p = p, .at_entry = env->at_entry && !is_return, .env = env };
	struct up_trace_hit hit = {
		.tr = p->tr,
		.spec = p->ts->index,
		.pid = h->pid,
		.tid = h->tid ? h->tid : h->pid,
		.time_ns = h->time_ns,
		.is_return = is_return,
		.addr = p->u.vaddr,
		.regs = regs,
		.read = env->read,
		.read_ctx = env->ctx,
		.priv = &hp,
	};

	hit.comm = tr_comm_cached(p->tr, hit.pid, hit.tid);
	p->ts->hit_fn(p->ts->hit_arg, &hit);
}

unsigned up_trace_hit_ustack(const struct up_trace_hit *h, uint64_t *out, unsigned max)
{
	const struct hook_priv *hp = h->priv;
	struct up_stack_syms *s = hp->p->tp ? tr_syms_of(hp->p->tp) : NULL;
	uint64_t ip = h->is_return ? h->regs->rip : h->addr;

	return up_stack_unwind(s, h->regs, ip, hp->at_entry, h->read, h->read_ctx, out, max);
}

int up_trace_hit_sym(const struct up_trace_hit *h, uint64_t addr, char *name, size_t size,
		     uint64_t *off)
{
	const struct hook_priv *hp = h->priv;
	struct up_stack_syms *s = hp->p->tp ? tr_syms_of(hp->p->tp) : NULL;
	char buf[512], *plus;

	*off = 0;
	if (size)
		name[0] = '\0';
	if (!s || up_stack_name(s, addr, buf, sizeof(buf)) <= 0)
		return -ENOENT;
	/* "sym+0xOFF [file]", "[file]+0xOFF", "0xADDR", "[unknown]" */
	plus = strrchr(buf, '+');
	if (buf[0] == '[' && plus && plus[-1] == ']') {
		plus[-1] = '\0';
		snprintf(name, size, "%s", buf + 1);
		*off = strtoull(plus + 1, NULL, 16);
		return -ENOENT;
	}
	if (buf[0] == '[' || !strncmp(buf, "0x", 2) || !plus)
		return -ENOENT;
	*plus = '\0';
	*off = strtoull(plus + 1, NULL, 16);
	snprintf(name, size, "%s", buf);
	return 0;
}

int up_trace_hit_comm_changed(const struct up_trace_hit *h)
{
	struct up_trace *tr = h->tr;

	/* the trap path's names, read again at their next use (tids are unique across
	   processes, so every entry can go) */
	for (unsigned i = 0; i < COMM_CACHE; i++)
		tr->comms[i].comm[0] = '\0';
	return uprobe_comm_changed(tr->ctx, h->pid);
}

static void on_comm_set(void *arg, const struct up_trace_hit *h)
{
	(void)arg;
	up_trace_hit_comm_changed(h);
}

/* How many libcs have the watch already; true if libc (a path) is one of them. */
static bool comm_watched(const struct up_trace *tr, const char *libc, unsigned *nlibs)
{
	size_t len = strlen(libc);
	bool found = false;

	*nlibs = 0;
	for (unsigned i = 0; i < tr->nspecs; i++) {
		const char *t = tr->specs[i]->text, *sp;

		if (!tr->specs[i]->internal || !t || strncmp(t, "r:upcomm/prctl", 14))
			continue;
		(*nlibs)++;
		sp = strchr(t, ' ');
		if (sp && !strncmp(sp + 1, libc, len) && !strcmp(sp + 1 + len, ":prctl"))
			found = true;
	}
	return found;
}

/*
 * A thread's name changes only by its thread group's doing: prctl(PR_SET_NAME), a write
 * of /proc/self/task/TID/comm (the kernel refuses one from another process), or exec
 * (after which the agent is a new one).  libc does the first two in prctl (which
 * pthread_setname_np calls for its own thread; __prctl is the same code) and in
 * pthread_setname_np (the comm file, for another thread), so their returns are
 * watched: trap-path return probes whose hits bump the names (above), the thread
 * stopped.  The session's own specs (tspec.internal): not the caller's to count.
 */
int up_trace_watch_comm(struct up_trace *tr, pid_t pid)
{
	static const char *const fns[2] = { "prctl", "pthread_setname_np" };
	char libc[PATH_MAX], spec[PATH_MAX + 64], err[512], nth[16] = "";
	unsigned n = 0, nlibs;

	if (!up_sym_find_lib("libc", pid, libc, sizeof(libc))) {
		tr_log(tr, "comm: renames not watched: no libc found");
		return -ENOENT;
	}
	/* several processes (-p, -p): each libc they map once */
	if (comm_watched(tr, libc, &nlibs))
		return 0;
	if (nlibs)
		snprintf(nth, sizeof(nth), "%u", nlibs + 1);
	for (unsigned i = 0; i < 2; i++) {
		int rc;

		snprintf(spec, sizeof(spec), "r:upcomm/%s%s %s:%s", i ? "setname" : "prctl", nth,
			 libc, fns[i]);
		rc = tr_add_spec(tr, spec, true, err, sizeof(err));
		if (rc == -ENOMEM)
			return rc;
		if (rc) {
			tr_log(tr, "comm: %s not watched: %s", fns[i], err);
			continue;
		}
		tr->specs[tr->nspecs - 1]->hit_fn = on_comm_set;
		n++;
		if (tr->opts.verbose > 0)
			tr_log(tr, "comm: renames watched at %s", spec);
	}
	return n ? 0 : -ENOENT;
}

bool up_trace_uses_comm(const struct up_trace *tr)
{
	for (unsigned i = 0; i < tr->nspecs; i++) {
		const struct tspec *ts = tr->specs[i];

		if (ts->removed || ts->internal)
			continue;
		for (int a = 0; a < ts->spec.nargs; a++)
			if (ts->spec.args[a].nops && ts->spec.args[a].ops[0].op == UP_FOP_COMM)
				return true;
		if (up_filter_uses(&ts->filt, UP_FILTER_COMM) ||
		    up_filter_uses(&ts->hfilt, UP_FILTER_COMM))
			return true;
	}
	return false;
}

int up_trace_hit_cpu(const struct up_trace_hit *h)
{
	int cpu = -1;

	tr_thread_info(h->tr, h->pid, h->tid, &cpu);
	return cpu;
}

unsigned up_trace_hit_args(const struct up_trace_hit *h, uint64_t *out, unsigned max)
{
	const struct hook_priv *hp = h->priv;
	const struct up_spec *sp = &hp->p->ts->spec;
	unsigned n = 0;

	for (int i = 0; i < sp->nargs && n < max; i++, n++) {
		struct up_fetch_value v;
		char buf[8];

		out[n] = 0;
		if (up_fetch_eval(&sp->args[i], hp->env, &v, buf, sizeof(buf)) || v.err)
			continue;
		out[n] = v.u;
		/* a signed operand ("-4@%edi") sign-extended, as bpftrace's usdt args */
		if (v.type.kind == UP_TYPE_S && v.type.size < 8) {
			unsigned sh = 64 - 8u * v.type.size;

			out[n] = (uint64_t)((int64_t)(v.u << sh) >> sh);
		}
	}
	return n;
}
