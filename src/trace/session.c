// SPDX-License-Identifier: MIT
/*
 * The tracing session's public object (trace/session.h): made and freed, started and
 * run, its switches (tracing_on, events' enable, set_event_pid), its counts.  The other
 * parts are named in session_int.h: the spec table (specs.c), the probes (arm.c), the
 * processes (procs.c), the hits (report.c, rawrec.c, triggers.c).
 *
 * It never places a probe nor formats a hit itself: it calls the file that does.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/format.h"
#include "trace/raw.h"
#include "trace/session_int.h"

void tr_probe_free(struct tprobe *p)
{
	if (!p)
		return;
	free(p->fetch);
	free(p->cond);
	free(p);
}

void tr_log(struct up_trace *tr, const char *fmt, ...)
{
	char msg[768];
	va_list ap;

	if (!tr->opts.log)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	tr->opts.log(tr->opts.log_arg, msg);
}

static void lib_log(void *arg, const char *msg)
{
	struct up_trace *tr = arg;

	if (tr->opts.log)
		tr->opts.log(tr->opts.log_arg, msg);
}

/* Is p's process and event on?  (The fast path's agent is told; the trap path asks.) */
bool tr_probe_on(const struct up_trace *tr, const struct tprobe *p)
{
	return !tr->off && p->ts->enabled && !p->ts->removed &&
	       (!tr->pid_filter || p->tp->pid == tr->pid_filter);
}

/* A batch of fast-path records was formatted: out it goes, as a trap-path hit does. */
static void cb_records(void *arg)
{
	struct up_trace *tr = arg;

	if (tr->opts.out && tr->opts.flush && fflush(tr->opts.out) && !tr->out_failed) {
		tr->out_failed = errno ? errno : EIO;
		uprobe_ctx_break(tr->ctx);
	}
}

int up_trace_new(const struct up_trace_opts *opts, struct up_trace **out)
{
	struct up_trace *tr = calloc(1, sizeof(*tr));
	struct uprobe_ctx_opts co = { 0 };
	int rc;

	if (!tr)
		return -ENOMEM;
	tr->opts = *opts;
	tr->status = -1;
	co.follow_fork = opts->follow;
	co.verbose = opts->verbose > 0;
	co.ring_bytes = opts->ring_bytes;
	co.fast_after = opts->fast_after;
	co.spool_bytes = opts->spool_bytes;
	co.no_spool = opts->no_spool;
	co.when_full = opts->when_full_drop ? UPROBE_WHEN_FULL_DROP : UPROBE_WHEN_FULL_BLOCK;
	co.log = lib_log;
	co.log_arg = tr;
	co.on_exit = tr_cb_exit;
	co.on_exec = tr_cb_exec;
	co.on_fork = tr_cb_fork;
	co.on_thread_exit = tr_cb_thread_exit;
	co.on_records = cb_records;
	if (opts->raw)
		co.raw_handler = tr_cb_raw;
	co.arg = tr;
	if (opts->raw && (!opts->out || opts->json)) {
		free(tr);
		return -EINVAL;
	}
	rc = uprobe_ctx_new(&co, &tr->ctx);
	if (rc) {
		free(tr);
		return rc;
	}
	if (opts->raw) {
		rc = up_raw_write_magic(opts->out);
		if (rc) {
			uprobe_ctx_free(tr->ctx);
			free(tr);
			return rc;
		}
	}
	*out = tr;
	return 0;
}

void up_trace_lib_stats(struct up_trace *tr, struct uprobe_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (tr->ctx)
		uprobe_ctx_stats(tr->ctx, st);
}

void up_trace_free(struct up_trace *tr)
{
	uint64_t lost;

	if (!tr)
		return;
	lost = tr->opts.raw ? up_trace_lost(tr) : 0;
	up_sym_elf_close(tr->spec_elf);
	tr->spec_elf = NULL;
	for (struct tproc *tp = tr->procs; tp; tp = tp->next)
		if (!tp->gone)
			up_refctr_put_all(&tp->refs, tp->pid);
	/* detaches from everything: the processes run on unprobed (what their rings still
	   hold is delivered first) */
	uprobe_ctx_free(tr->ctx);
	tr->ctx = NULL;
	if (tr->opts.raw && !tr->out_failed)
		up_raw_write_end(tr->opts.out, tr->raw_records, lost);
	free(tr->raw_buf);
	free(tr->eargs);
	while (tr->procs) {
		struct tproc *tp = tr->procs;

		tr->procs = tp->next;
		tr_drop_probes(tp);
		up_stack_syms_free(tp->syms);
		up_refctr_free(&tp->refs);
		free(tp->armed);
		free(tp);
	}
	while (tr->retired) {
		struct tprobe *p = tr->retired;

		tr->retired = p->next;
		tr_probe_free(p);
	}
	for (unsigned i = 0; i < tr->nspecs; i++) {
		up_hist_free(tr->specs[i]->hist);
		free(tr->specs[i]->hist);
		free(tr->specs[i]->hist_text);
		free(tr->specs[i]->filter_text);
		up_spec_free(&tr->specs[i]->spec);
		free(tr->specs[i]->text);
		free(tr->specs[i]);
	}
	free(tr->specs);
	tr_forget_threads(tr);
	free(tr->line);
	free(tr);
}

uint64_t up_trace_lost(struct up_trace *tr)
{
	uint64_t n = tr->lost;

	for (struct tproc *tp = tr->procs; tp; tp = tp->next) {
		for (struct tprobe *p = tp->probes; p; p = p->next) {
			uint64_t l;

			if (p->recording && !p->counted && !uprobe_lost(tr->ctx, &p->u, &l))
				n += l;
		}
	}
	return n;
}

int up_trace_start(struct up_trace *tr)
{
	struct up_trace_arming a;

	for (struct tproc *tp = tr->procs; tp; tp = tp->next)
		tr_arm_proc(tr, tp); /* each failure is logged with its spec and reason */
	/* a seed spec for a pid that is not traced can never fire */
	for (unsigned i = 0; i < tr->nspecs; i++) {
		struct tspec *ts = tr->specs[i];
		pid_t want;

		if (ts->spec.kind != UP_SPEC_SEED)
			continue;
		want = ts->spec.pid ? ts->spec.pid : tr->launched;
		if (!tr_proc_of(tr, want)) {
			tr_log(tr, "'%s': process %d is not traced (%s)", ts->text, (int)want,
			       ts->spec.pid ? "add -p PID" : "PID 0 needs a command after --");
			ts->fatal = true;
		}
	}
	up_trace_arming(tr, &a);
	if (a.failed && (tr->opts.strict || (!a.armed && !a.pending)))
		return -ECANCELED;
	if (tr->launched)
		return uprobe_resume(tr->ctx, tr->launched);
	return 0;
}

int up_trace_run(struct up_trace *tr, volatile int *stop)
{
	int rc;

	/*
	 * Blocking: no SIGCHLD handler and self-pipe, so a hit costs the wait and the
	 * three ptrace calls, nothing more.  Arming for new images and libraries happens
	 * in the callbacks, while the thread concerned is stopped.
	 */
	for (;;) {
		tr->pend_break = false;
		rc = uprobe_ctx_run(tr->ctx, stop);
		tr_flush_pending(tr);
		if (rc != -EINTR || !tr->pend_break || (stop && *stop) || tr->out_failed)
			break;
	}
	if (tr->opts.out && fflush(tr->opts.out) && !tr->out_failed)
		tr->out_failed = errno ? errno : EIO;
	if (tr->out_failed)
		return -tr->out_failed;
	return rc;
}

void up_trace_finish(struct up_trace *tr)
{
	if (!tr->ctx)
		return;
	uprobe_ctx_finish(tr->ctx);
	tr_flush_pending(tr);
	if (tr->opts.out && fflush(tr->opts.out) && !tr->out_failed)
		tr->out_failed = errno ? errno : EIO;
}

int up_trace_status(const struct up_trace *tr)
{
	return tr->status;
}

const char *up_trace_spec_label(const struct up_trace *tr, unsigned i)
{
	return i < tr->nspecs ? tr->specs[i]->label : "";
}

uint64_t up_trace_spec_lost(struct up_trace *tr, unsigned i)
{
	uint64_t n;

	if (i >= tr->nspecs)
		return 0;
	n = tr->specs[i]->lost;
	for (struct tproc *tp = tr->procs; tp; tp = tp->next) {
		for (struct tprobe *p = tp->probes; p; p = p->next) {
			uint64_t l;

			if (p->ts == tr->specs[i] && p->recording && !p->counted &&
			    !uprobe_lost(tr->ctx, &p->u, &l))
				n += l;
		}
	}
	return n;
}

int up_trace_print_lost(struct up_trace *tr, FILE *out, bool json)
{
	uint64_t all = up_trace_lost(tr);
	char name[256];
	bool first = true;

	if (!all)
		return 0;
	if (json)
		fprintf(out, "{\"type\":\"summary\",\"records_lost\":%" PRIu64 ",\"lost\":{", all);
	else
		fprintf(out, "# records lost: %" PRIu64 " (the in-process ring was full)\n", all);
	for (unsigned i = 0; i < tr->nspecs; i++) {
		uint64_t n = up_trace_spec_lost(tr, i);

		if (!n)
			continue;
		if (json) {
			up_fmt_json_string(name, sizeof(name), tr->specs[i]->label,
					   strlen(tr->specs[i]->label));
			fprintf(out, "%s%s:%" PRIu64, first ? "" : ",", name, n);
		} else {
			fprintf(out, "# records lost: %" PRIu64 " of %s\n", n, tr->specs[i]->label);
		}
		first = false;
	}
	if (json)
		fputs("}}\n", out);
	return fflush(out) ? -errno : 0;
}

void up_trace_print_counts(struct up_trace *tr, FILE *out)
{
	for (unsigned i = 0; i < tr->nspecs; i++) {
		const struct tspec *ts = tr->specs[i];
		uint64_t hits = up_trace_hits(tr, i);
		char where[64], line[1024];
		const char *w;

		if (ts->removed || ts->internal)
			continue;
		if (ts->spec.kind == UP_SPEC_SEED)
			snprintf(where, sizeof(where), "%d",
				 (int)(ts->spec.pid ? ts->spec.pid : tr->launched));
		w = ts->spec.kind == UP_SPEC_SEED ? where : ts->is_file ? ts->spec.path : "(any)";
		if (tr->opts.json)
			up_fmt_count_json(line, sizeof(line), w, ts->label, hits);
		else
			up_fmt_count_row(line, sizeof(line), w, ts->label, hits);
		fputs(line, out);
	}
}

static void sync_enabled(struct up_trace *tr)
{
	for (struct tproc *tp = tr->procs; tp; tp = tp->next)
		for (struct tprobe *p = tp->probes; p; p = p->next)
			if (p->recording)
				uprobe_set_enabled(tr->ctx, &p->u, tr_probe_on(tr, p));
}

void up_trace_enable(struct up_trace *tr, unsigned i, bool on)
{
	if (i < tr->nspecs)
		tr->specs[i]->enabled = on;
	sync_enabled(tr);
}

bool up_trace_enabled(const struct up_trace *tr, unsigned i)
{
	return i < tr->nspecs && tr->specs[i]->enabled;
}

void up_trace_set_on(struct up_trace *tr, bool on)
{
	tr->off = !on;
	sync_enabled(tr);
}

int up_trace_timeout(struct up_trace *tr)
{
	return uprobe_ctx_timeout(tr->ctx);
}

void up_trace_set_pid_filter(struct up_trace *tr, pid_t pid)
{
	tr->pid_filter = pid;
	sync_enabled(tr);
}

int up_trace_set_wait_hook(struct up_trace *tr, void (*hook)(void *arg, int fd), void *arg)
{
	return uprobe_ctx_set_wait_hook(tr->ctx, hook, arg);
}

int up_trace_fd(struct up_trace *tr)
{
	return uprobe_ctx_fd(tr->ctx);
}

int up_trace_dispatch(struct up_trace *tr)
{
	int rc = uprobe_ctx_dispatch(tr->ctx);

	tr_flush_pending(tr);
	if (tr->opts.out)
		fflush(tr->opts.out);
	return rc;
}
