// SPDX-License-Identifier: MIT
/*
 * Hist triggers on the session's events (trace/hist.h): attached and removed, their
 * tables fed from the trap path (tr_hist_hit) and from the agents' in-process tables
 * (read live, or handed over when a probe leaves the fast path), printed.
 *
 * An event with a trigger is aggregated, never printed as lines.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/session_int.h"

#define HIST_TEXT_MAX 4096 /* a key field as text: a string, a symbol, a named stack */

/* A number as the agent sees it: s-types sign-extended from their size. */
static uint64_t hist_num(const struct up_fetch_value *v)
{
	uint64_t u = v->err ? 0 : v->u;

	if (!v->err && v->type.kind == UP_TYPE_S && v->type.size && v->type.size < 8 &&
	    (u >> (v->type.size * 8 - 1) & 1))
		u |= ~0ull << (v->type.size * 8);
	return u;
}

/* A .sym or .sym-offset key's text: the function that holds the address. */
static const char *sym_text(struct tproc *tp, const struct up_hist_field *f, uint64_t v,
			    char *buf, size_t size)
{
	if (f->mod != UP_HIST_MOD_SYM && f->mod != UP_HIST_MOD_SYM_OFFSET)
		return NULL;
	up_stack_name(tr_syms_of(tp), v, buf, size);
	if (f->mod == UP_HIST_MOD_SYM) {
		char *plus = strchr(buf, '+');

		if (plus && buf[0] != '[')
			*plus = '\0'; /* the kernel's .sym: the name alone */
	}
	return buf;
}

/* A trap-path hit of a hist's event: its key and vals, added to the table. */
void tr_hist_hit(struct tprobe *p, uprobe_regs_t *regs, bool is_return, const struct hit *h,
		 struct up_fetch_env *env)
{
	static char arena[64 * 1024], text[UP_HIST_KEYS_MAX][HIST_TEXT_MAX];
	struct tspec *ts = p->ts;
	struct up_hist *hi = ts->hist;
	struct up_fetch_value vals[ts->spec.nargs ? ts->spec.nargs : 1];
	uint64_t v[UP_HIST_VALS_MAX] = { 0 }, dur = 0;
	struct up_hist_key k = { { 0 }, { NULL } };

	env->comm = tr_comm_cached(p->tr, h->pid, h->tid);
	up_fetch_eval_all(&ts->spec, env, vals, arena, sizeof(arena));
	if (is_return)
		uprobe_current_duration(p->tr->ctx, &dur);
	if (!tr_filter_holds(ts, vals, dur, env->comm))
		return;
	for (unsigned i = 0; i < hi->nkeys; i++) {
		const struct up_hist_field *f = &hi->key[i];
		uint64_t addr[UP_HIST_STACK_DEPTH];
		unsigned n;

		switch (f->src) {
		case UP_HIST_SRC_ARG:
			if (f->is_string) {
				const struct up_fetch_value *sv = &vals[f->arg];
				size_t len = sv->err ? 7 : sv->str_len;

				if (len > UP_HIST_STRING_KEY - 1)
					len = UP_HIST_STRING_KEY - 1; /* as the agent cuts it */
				memcpy(text[i], sv->err ? "(fault)" : sv->str, len);
				text[i][len] = '\0';
				k.str[i] = text[i];
				break;
			}
			k.num[i] = up_hist_key_value(f, hist_num(&vals[f->arg]));
			k.str[i] = sym_text(p->tp, f, k.num[i], text[i], sizeof(text[i]));
			break;
		case UP_HIST_SRC_PID:
			k.num[i] = (uint64_t)h->tid;
			break;
		case UP_HIST_SRC_DURATION:
			k.num[i] = up_hist_key_value(f, dur);
			break;
		case UP_HIST_SRC_STACK:
			n = up_stack_unwind(env->syms, regs, is_return ? regs->rip : p->u.vaddr,
					    up_spec_at_function_entry(&ts->spec), env->read,
					    env->ctx, addr, UP_HIST_STACK_DEPTH);
			k.str[i] = tr_stack_text(p->tp, addr, n, text[i], sizeof(text[i]));
			break;
		default:
			break;
		}
	}
	for (unsigned i = 0; i < hi->nvals; i++) {
		const struct up_hist_field *f = &hi->val[i];

		if (f->src == UP_HIST_SRC_ARG)
			v[i] = hist_num(&vals[f->arg]);
		else if (f->src == UP_HIST_SRC_DURATION)
			v[i] = dur;
	}
	if (up_hist_table_add(hi->base, &k, 1, v) == -ENOMEM)
		tr_log(p->tr, "'%s': out of memory for the histogram", ts->hist_text);
}

/* An entry of an agent's table (hits already combined), added to t. */
static void hist_merge(struct tprobe *p, const struct uprobe_agg_entry *e, struct up_hist_table *t)
{
	static char text[UP_HIST_KEYS_MAX][HIST_TEXT_MAX];
	const struct up_hist *hi = p->ts->hist;
	struct up_hist_key k = { { 0 }, { NULL } };
	uint64_t v[UP_HIST_VALS_MAX] = { 0 };
	unsigned w = 0;

	if (!e->key) {
		up_hist_table_drop(t, e->val[0]);
		return;
	}
	for (unsigned i = 0; i < hi->nkeys && i < p->agg.nkeys; i++) {
		const struct up_hist_field *f = &hi->key[i];
		unsigned words = p->agg.key[i].words, n = 0;

		if (w + words > e->nkey)
			return; /* not this probe's layout: cannot happen */
		if (f->src == UP_HIST_SRC_STACK) {
			while (n < words && e->key[w + n])
				n++;
			k.str[i] = tr_stack_text(p->tp, e->key + w, n, text[i], sizeof(text[i]));
		} else if (f->src == UP_HIST_SRC_ARG && f->is_string) {
			memcpy(text[i], e->key + w, words * 8);
			text[i][words * 8 - 1] = '\0';
			k.str[i] = text[i];
		} else {
			k.num[i] = e->key[w];
			k.str[i] = sym_text(p->tp, f, k.num[i], text[i], sizeof(text[i]));
		}
		w += words;
	}
	for (unsigned i = 0; i < hi->nvals; i++)
		if (p->aval[i] >= 0 && (unsigned)p->aval[i] + 1 < e->nval)
			v[i] = e->val[1 + p->aval[i]];
	if (up_hist_table_add(t, &k, e->val[0], v) == -ENOMEM)
		tr_log(p->tr, "'%s': out of memory for the histogram", p->ts->hist_text);
}

/* The agent's tables of a probe that leaves the fast path (exit, exec, removal). */
void tr_on_agg(struct uprobe *u, const struct uprobe_agg_entry *e)
{
	struct tprobe *p = u->data;

	/* a probe whose trigger was taken away (or replaced) while it went */
	if (!p->ts->hist || p->hist != p->ts->hist)
		return;
	hist_merge(p, e, p->ts->hist->base);
}

struct live_read {
	struct tprobe *p;
	struct up_hist_table *t;
};

static void live_one(void *arg, const struct uprobe_agg_entry *e)
{
	struct live_read *lr = arg;

	hist_merge(lr->p, e, lr->t);
}

/*
 * h (parsed from text) becomes ts's trigger: its fields bound to the event's arguments,
 * its filter added to the event's conditions.  0, or a negative errno with err; h is
 * the caller's to free on failure.
 */
static int attach_hist(struct tspec *ts, struct up_hist *h, const char *text, char *err,
		       size_t errlen)
{
	struct up_spec_err se = { .pos = -1, .len = 1 };
	int rc;

	rc = up_hist_resolve(h, &ts->spec, &se);
	if (rc) {
		if (rc == -EINVAL)
			up_spec_err_format(text, &se, err, errlen);
		return rc;
	}
	if (ts->hist) {
		snprintf(err, errlen, "'%s': %s has a hist trigger already (one an event)\n", text,
			 ts->label);
		return -EEXIST;
	}
	if (h->filter) {
		struct up_filter *flt = &ts->hfilt;
		const char *at = strstr(text, h->filter);
		char msg[256];

		rc = up_filter_parse(h->filter, flt, &se);
		if (!rc && up_filter_resolve(flt, &ts->spec, msg, sizeof(msg))) {
			memset(flt, 0, sizeof(*flt));
			snprintf(err, errlen, "'%s': %s\n", text, msg);
			return -EINVAL;
		}
		if (rc) {
			if (at && se.pos >= 0)
				se.pos += (int)(at - text);
			up_spec_err_format(text, &se, err, errlen);
			return -EINVAL;
		}
	}
	ts->hist_text = strdup(text);
	if (!ts->hist_text) {
		memset(&ts->hfilt, 0, sizeof(ts->hfilt));
		return -ENOMEM;
	}
	tr_filter_setup(ts);
	ts->hist = h;
	return 0;
}

/* ts's trigger goes: its table and its conditions. */
static void detach_hist(struct tspec *ts)
{
	memset(&ts->hfilt, 0, sizeof(ts->hfilt));
	tr_filter_setup(ts);
	up_hist_free(ts->hist);
	free(ts->hist);
	ts->hist = NULL;
	free(ts->hist_text);
	ts->hist_text = NULL;
}

int up_trace_add_trigger(struct up_trace *tr, const char *text, char *err, size_t errlen)
{
	struct up_hist *h = calloc(1, sizeof(*h));
	struct up_spec_err se = { .pos = -1, .len = 1 };
	int rc, i;

	err[0] = '\0';
	if (!h)
		return -ENOMEM;
	rc = up_hist_parse(text, true, h, &se);
	if (rc) {
		free(h);
		if (rc == -EINVAL)
			up_spec_err_format(text, &se, err, errlen);
		return rc;
	}
	if (tr->opts.metrics)
		up_hist_add_sum(h); /* a histogram's _sum */
	i = up_trace_find(tr, h->group[0] ? h->group : NULL, h->event);
	if (i < 0 || tr->specs[i]->spec.kind != UP_SPEC_EVENT) {
		snprintf(err, errlen, "'%s': no event %s%s%s: a trigger names an event given with "
				      "-e (p:GRP/EVENT ...)\n", text, h->group, h->group[0] ? "/" : "",
			 h->event);
		rc = -ENOENT;
	} else {
		rc = attach_hist(tr->specs[i], h, text, err, errlen);
	}
	if (rc) {
		up_hist_free(h);
		free(h);
	}
	return rc;
}

struct up_hist_table *tr_hist_live(struct up_trace *tr, const struct tspec *ts)
{
	struct up_hist_table *t = up_hist_table_clone(ts->hist->base);

	if (!t)
		return NULL;
	/* what the agents hold now, on top of what came from the trap path and from the
	   tables of probes gone */
	for (struct tproc *tp = tr->procs; tp; tp = tp->next) {
		for (struct tprobe *p = tp->probes; p; p = p->next) {
			struct live_read lr = { p, t };

			if (p->ts == ts && p->u.agg_handler)
				uprobe_agg_read(tr->ctx, &p->u, live_one, &lr);
		}
	}
	return t;
}

int up_trace_print_hist(struct up_trace *tr, unsigned i, enum up_hist_style style, FILE *out)
{
	struct tspec *ts = i < tr->nspecs ? tr->specs[i] : NULL;
	struct up_hist_table *t;
	int rc;

	if (!ts || !ts->hist)
		return -ENOENT;
	t = tr_hist_live(tr, ts);
	if (!t)
		return -ENOMEM;
	rc = up_hist_print(ts->hist, t, style, out);
	up_hist_table_free(t);
	return rc;
}

int up_trace_hist_for_each(struct up_trace *tr, unsigned i, up_hist_entry_fn fn, void *ctx,
			   uint64_t *dropped)
{
	struct tspec *ts = i < tr->nspecs ? tr->specs[i] : NULL;
	struct up_hist_table *t;
	int rc;

	if (!ts || !ts->hist)
		return -ENOENT;
	t = up_hist_table_clone(ts->hist->base);
	if (!t)
		return -ENOMEM;
	for (struct tproc *tp = tr->procs; tp; tp = tp->next)
		for (struct tprobe *p = tp->probes; p; p = p->next) {
			struct live_read lr = { p, t };

			if (p->ts == ts && p->u.agg_handler)
				uprobe_agg_read(tr->ctx, &p->u, live_one, &lr);
		}
	rc = up_hist_table_for_each(t, fn, ctx);
	if (dropped)
		*dropped = up_hist_table_dropped(t);
	up_hist_table_free(t);
	return rc;
}

int up_trace_hist_stacks(struct up_trace *tr, unsigned i,
			 int (*fn)(void *arg, const char *frames, uint64_t hits), void *arg)
{
	struct tspec *ts = i < tr->nspecs ? tr->specs[i] : NULL;
	struct up_hist_table *t;
	int rc;

	if (!ts || !ts->hist || ts->removed)
		return -ENOENT;
	t = tr_hist_live(tr, ts);
	if (!t)
		return -ENOMEM;
	rc = up_hist_each_stack(ts->hist, t, fn, arg);
	up_hist_table_free(t);
	return rc;
}

int up_trace_add_stack_hists(struct up_trace *tr, char *err, size_t errlen)
{
	for (unsigned i = 0; i < tr->nspecs; i++) {
		const struct tspec *ts = tr->specs[i];
		char text[2 * UP_SPEC_NAME_MAX + 64];
		int rc;

		if (ts->hist || ts->spec.kind != UP_SPEC_EVENT)
			continue;
		snprintf(text, sizeof(text), "%s%s%s:hist:keys=stacktrace:size=16384",
			 ts->spec.group, ts->spec.group[0] ? "/" : "", ts->spec.event);
		rc = up_trace_add_trigger(tr, text, err, errlen);
		if (rc)
			return rc;
	}
	return 0;
}

void up_trace_print_hists(struct up_trace *tr, enum up_hist_style style, FILE *out)
{
	unsigned n = 0;

	for (unsigned i = 0; i < tr->nspecs; i++) {
		const struct tspec *ts = tr->specs[i];

		if (!ts->hist || ts->removed)
			continue;
		if (n++ && style != UP_HIST_JSON)
			fputc('\n', out);
		if (style == UP_HIST_TEXT && up_trace_nhists(tr) > 1)
			fprintf(out, "# %s\n", ts->label); /* which event's hist file this is */
		up_trace_print_hist(tr, i, style, out);
	}
	fflush(out);
}

unsigned up_trace_nhists(const struct up_trace *tr)
{
	unsigned n = 0;

	for (unsigned i = 0; i < tr->nspecs; i++)
		n += tr->specs[i]->hist && !tr->specs[i]->removed;
	return n;
}

int up_trace_set_trigger(struct up_trace *tr, unsigned i, const char *text, char *err,
			 size_t errlen)
{
	struct up_spec_err se = { .pos = -1, .len = 1 };
	struct tspec *ts;
	struct up_hist *h;
	const char *t = text;
	bool remove;
	int rc;

	err[0] = '\0';
	if (i >= tr->nspecs || tr->specs[i]->removed)
		return -ENOENT;
	ts = tr->specs[i];
	while (*t == ' ' || *t == '\t')
		t++;
	remove = *t == '!';
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	rc = up_hist_parse(t + remove, false, h, &se);
	if (rc) {
		free(h);
		if (rc == -EINVAL) {
			if (se.pos >= 0)
				se.pos += (int)(t + remove - text);
			up_spec_err_format(text, &se, err, errlen);
		}
		return rc;
	}
	if (tr->opts.metrics)
		up_hist_add_sum(h); /* a histogram's _sum */
	if (remove) {
		/* as the kernel: the trigger that was added with the same keys goes */
		char want[512], have[512];

		up_hist_trigger_info(h, want, sizeof(want));
		if (ts->hist)
			up_hist_trigger_info(ts->hist, have, sizeof(have));
		up_hist_free(h);
		free(h);
		if (!ts->hist || strcmp(want, have)) {
			snprintf(err, errlen, "'%s': no such trigger on %s\n", text, ts->label);
			return -ENOENT;
		}
		tr_disarm_spec(tr, i); /* the agents' tables merge into the table, which goes */
		detach_hist(ts);
	} else {
		if (ts->spec.kind != UP_SPEC_EVENT) {
			snprintf(err, errlen, "'%s': hist triggers are for p:/r: events\n", text);
			up_hist_free(h);
			free(h);
			return -EINVAL;
		}
		rc = attach_hist(ts, h, text, err, errlen);
		if (rc) {
			up_hist_free(h);
			free(h);
			return rc;
		}
		tr_disarm_spec(tr, i); /* armed again below, aggregating */
	}
	up_trace_arm_all(tr, false);
	return 0;
}

int up_trace_trigger_text(struct up_trace *tr, unsigned i, char *buf, size_t size)
{
	if (size)
		buf[0] = '\0';
	if (i >= tr->nspecs || !tr->specs[i]->hist)
		return -ENOENT;
	return up_hist_trigger_info(tr->specs[i]->hist, buf, size);
}
