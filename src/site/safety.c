// SPDX-License-Identifier: MIT
/*
 * The safety net (src/agent/net.h): the tracer's half.  Before the first int3 of ours
 * goes into an address space, the net's handler (src/agent/blob/net.c) is mapped there
 * and made the program's SIGTRAP handler, the program's own disposition kept in the
 * net's header (and here) for the handler to chain to and for a detach to put back.
 * Every int3 we write gets an entry (its byte, a copy of its instruction that runs
 * where one does, its slot) before it is written; it loses it after it is taken out.
 * Every return the trap path hijacks gets an entry before the stack word is written.
 * The tracer's death then costs the program nothing: the kernel hands our traps to the
 * handler, which finishes them.  docs/design.md section 9.
 *
 * It writes nothing into the program's text; it never unmaps the net (a thread may be
 * in the handler, or in the program's handler called from it): a detach puts the
 * disposition back (up_site_net_detach) and leaves the two mappings to the teardown.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/ucontext.h>
#include <sys/uio.h>
#include <unistd.h>

#include "site/internal.h"

extern const uint8_t up_net_blob[];
extern const size_t up_net_blob_size;

#ifndef SA_RESTORER
#define SA_RESTORER 0x04000000
#endif

/* what net.c assumes of a struct ucontext */
_Static_assert(offsetof(ucontext_t, uc_mcontext.gregs) == 40, "ucontext layout");
_Static_assert(offsetof(ucontext_t, uc_sigmask) == 296, "ucontext layout");
_Static_assert(REG_RAX == 13 && REG_RSP == 15 && REG_RIP == 16 && REG_EFL == 17, "gregs layout");
_Static_assert(offsetof(struct user_regs_struct, orig_rax) == 15 * 8, "user_regs_struct layout");
_Static_assert(UPN_SLOT_SIZE *UP_XOL_SLOTS == UP_XOL_AREA_SIZE, "XOL slots");
_Static_assert(UPN_SI_MOVED == UP_SI_MOVED, "the mark of a moved thread");

#define SITES_N (1u << UPN_SITES_ORDER)
#define RETS_N	(1u << UPN_RETS_ORDER)


/*
 * The data mapping is read and written directly, never through the task layer's cache
 * of a quiesced process's memory: the kernel writes into it too (rt_sigaction's old
 * disposition), and reads it in a remote system call.
 */
static int net_io(struct up_sites *s, uint64_t addr, void *buf, size_t len, bool wr)
{
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };
	ssize_t r = wr ? process_vm_writev(s->pid, &local, 1, &remote, 1, 0) :
			 process_vm_readv(s->pid, &local, 1, &remote, 1, 0);

	return r == (ssize_t)len ? 0 : r < 0 ? -errno : -EIO;
}

static int net_write(struct up_sites *s, uint64_t addr, const void *buf, size_t len)
{
	return net_io(s, addr, (void *)buf, len, true);
}

static uint64_t sites_at(const struct up_net *n)
{
	return n->data + UPN_HDR_SIZE;
}

static uint64_t rets_at(const struct up_net *n)
{
	return sites_at(n) + sizeof(struct upn_site) * SITES_N;
}

static void net_off(struct up_sites *s, const char *why, int rc)
{
	s->net.failed = true;
	site_log(s->ctx,
		 "process %d: no safety net (%s: %s): the tracer's death would take "
		 "the process with it",
		 (int)s->pid, why, strerror(-rc));
}

/* The tracer's copies of the net's tables. */
static void net_tables_free(struct up_net *n)
{
	free(n->sites);
	free(n->rets);
	free(n->ret_live);
	n->sites = NULL;
	n->rets = NULL;
	n->ret_live = NULL;
}

static int site_write(struct up_sites *s, unsigned i);
static int site_slot(const struct up_net *n, uint64_t vaddr, bool *found);

/*
 * The int3s written before the net could be installed (no thread could run its system
 * calls then: up_site_int3_insert goes on without it) into its table, with their bytes,
 * and the return trampoline's: a death found them missing and took one for the
 * program's own (die: killed by SIGTRAP at sv_sig's int3, 1 run of 50).  Their copies
 * and slots come when the tracer puts them again; healing needs only the byte.
 */
static void net_backfill(struct up_sites *s)
{
	struct up_net *n = &s->net;

	for (unsigned k = 0; k < s->live.n; k++) {
		uint64_t v = s->live.v[k].vaddr;
		int orig = up_site_written_orig(s, v);
		bool found;
		int at;

		if (orig < 0)
			continue;
		at = site_slot(n, v, &found);
		if (at < 0 || found)
			continue;
		memset(&n->sites[at], 0, sizeof(n->sites[at]));
		n->sites[at].vaddr = v;
		n->sites[at].orig = (uint8_t)orig;
		site_write(s, (unsigned)at);
	}
	if (n->ret_int3)
		net_write(s, n->data + offsetof(struct upn_hdr, ret_int3), &n->ret_int3, 8);
}

/* The net's three system calls, and what the tracer writes between them (net_next). */
struct net_chain {
	struct up_sites *s;
	uint64_t word[4]; /* the blob's first words: data's address, the handler's,
			     the restorer's and the stub's offsets */
	int rc;		  /* what ended it early: a call's -errno or a write's */
	bool mapped;	  /* both mappings made: a failure after is the handler's */
	bool done;	  /* ours is the disposition */
};

/* ours, as installed: every signal blocked but SIGTRAP while it runs (a handler of the
   program's that ran on top of ours, with SIGTRAP blocked, and hit an int3 not yet
   healed, would be killed: a forced signal that is blocked is reset to SIG_DFL), on the
   program's signal stack if it asked for one; the handler sets the program's mask itself
   when it calls its handler */
static int net_ours(struct up_sites *s, const uint64_t word[4])
{
	struct up_net *n = &s->net;

	n->ours.handler = n->code + word[1];
	n->ours.restorer = n->code + word[2];
	n->ours.flags = SA_SIGINFO | SA_RESTORER | SA_NODEFER |
			(n->prog.flags & (SA_ONSTACK | SA_RESTART));
	n->ours.mask = ~0ull & ~(1ull << (SIGTRAP - 1));
	return net_write(s, n->data + offsetof(struct upn_hdr, ours), &n->ours, sizeof(n->ours));
}

static bool net_next(void *arg, unsigned k, int64_t prev, long *nr, uint64_t a[6])
{
	struct net_chain *c = arg;
	struct up_sites *s = c->s;
	struct up_net *n = &s->net;
	struct upn_hdr h;
	int rc;

	if (k == 4) {
		/* ours is the disposition since the third call; this one only gave it the
		   program's SA_ONSTACK or SA_RESTART, and ours stays if it failed */
		c->done = true;
		return false;
	}
	if (k > 0 && prev < 0 && prev > -4096) {
		c->rc = (int)prev;
		return false;
	}
	switch (k) {
	case 0: /* the tables' page */
		*nr = SYS_mmap;
		a[1] = UPN_DATA_SIZE, a[2] = PROT_READ | PROT_WRITE;
		a[3] = MAP_PRIVATE | MAP_ANONYMOUS, a[4] = (uint64_t)-1;
		return true;
	case 1: /* the handler's */
		n->data = (uint64_t)prev;
		*nr = SYS_mmap;
		a[1] = UPN_CODE_SIZE, a[2] = PROT_READ | PROT_EXEC;
		a[3] = MAP_PRIVATE | MAP_ANONYMOUS, a[4] = (uint64_t)-1;
		return true;
	case 2: /* both there: the code, the header, ours; then ours in, the program's out */
		n->code = (uint64_t)prev;
		c->mapped = true;
		memcpy(c->word, up_net_blob, sizeof(c->word));
		c->word[0] = n->data;
		rc = up_proc_write_text(s->p, n->code, up_net_blob, up_net_blob_size);
		if (!rc)
			rc = up_proc_write_text(s->p, n->code, c->word, 8);
		memset(&h, 0, sizeof(h));
		h.magic = UPN_MAGIC;
		h.self = n->data;
		h.sites = sites_at(n);
		h.rets = rets_at(n);
		if (!rc)
			rc = net_write(s, n->data, &h, sizeof(h));
		/* the program's flags are not known yet: none of them (SIGTRAP's are none
		   but in a program that set a handler with SA_ONSTACK or SA_RESTART) */
		memset(&n->prog, 0, sizeof(n->prog));
		if (!rc)
			rc = net_ours(s, c->word);
		if (rc) {
			c->rc = rc;
			return false;
		}
		/* one call: the kernel writes the program's disposition into the header
		   as it installs ours, so the handler never runs without it */
		*nr = SYS_rt_sigaction;
		a[0] = SIGTRAP, a[1] = n->data + offsetof(struct upn_hdr, ours);
		a[2] = n->data + offsetof(struct upn_hdr, prog), a[3] = 8;
		return true;
	case 3:
		rc = net_io(s, n->data + offsetof(struct upn_hdr, prog), &n->prog, sizeof(n->prog),
			    false);
		if (rc) {
			/* ours is in, the program's unknown: the handler would pass its own
			   SIGTRAPs to the default after a death; said, not undone */
			site_log(s->ctx, "process %d: cannot read the program's SIGTRAP disposition "
					 "back (%s)", (int)s->pid, strerror(-rc));
			memset(&n->prog, 0, sizeof(n->prog));
		}
		/* the program's own signal stack and restart for ours too: a fourth call */
		if (!(n->prog.flags & (SA_ONSTACK | SA_RESTART)) || net_ours(s, c->word)) {
			c->done = true;
			return false;
		}
		*nr = SYS_rt_sigaction;
		a[0] = SIGTRAP, a[1] = n->data + offsetof(struct upn_hdr, ours), a[2] = 0, a[3] = 8;
		return true;
	default:
		c->done = true;
		return false;
	}
}

int up_site_net_ensure(struct up_sites *s, struct up_task *t)
{
	struct up_net *n = &s->net;
	struct net_chain c = { .s = s };
	int64_t r;
	int rc;

	if (n->installed || n->failed)
		return n->installed ? 0 : -ENOTSUP;
	if (!t)
		return -EAGAIN;
	if (getenv("UPROBE_NO_NET")) {
		n->failed = true; /* for measuring what the net saves */
		return -ENOTSUP;
	}
	if (up_proc_mode(s->p) != 64) {
		n->failed = true; /* its handler is 64-bit code */
		return -ENOTSUP;
	}
	n->sites = calloc(SITES_N, sizeof(*n->sites));
	n->rets = calloc(RETS_N, sizeof(*n->rets));
	n->ret_live = calloc(RETS_N / 64, sizeof(*n->ret_live));
	if (!n->sites || !n->rets || !n->ret_live) {
		rc = -ENOMEM;
		goto fail;
	}
	/* mmap, mmap, rt_sigaction (ours in, the program's out; a fourth only for its
	   SA_ONSTACK or SA_RESTART), the tracer's writes between them: one run where the
	   process has no code of ours yet */
	rc = up_task_syscall_chain(t, net_next, &c);
	if ((rc == -ESRCH || rc == -EAGAIN) && !n->data) {
		/* t cannot run code now (a stop of its own waits): another thread will */
		net_tables_free(n);
		return rc;
	}
	if (!rc && !c.done)
		rc = c.rc ? c.rc : -EIO;
	if (rc) {
		net_off(s, c.mapped ? "cannot install its handler" : "cannot map it", rc);
		goto unmap;
	}
	n->installed = true;
	net_backfill(s);
	/* the remote system calls from now on: a death in one leaves its thread to us */
	up_proc_set_syscall_stub(s->p, n->code + c.word[3]);
	/* both join the list of our mappings, unmapped at a detach once no thread can be
	   inside (site.c's teardown, after up_site_net_detach put the disposition back) */
	if (up_xol_note_map(&s->xol, n->data, UPN_DATA_SIZE, false) ||
	    up_xol_note_map(&s->xol, n->code, UPN_CODE_SIZE, true))
		site_log(s->ctx, "process %d: the safety net's pages are not listed: they stay "
				 "mapped after a detach (%u bytes)",
			 (int)s->pid, (unsigned)(UPN_DATA_SIZE + UPN_CODE_SIZE));
	if (s->ctx->opts->verbose)
		site_log(s->ctx,
			 "process %d: safety net at 0x%" PRIx64 " (the program's SIGTRAP "
			 "disposition 0x%" PRIx64 " kept)",
			 (int)s->pid, n->code, n->prog.handler);
	return 0;
unmap:
	if (n->data && n->data < (uint64_t)-4096)
		up_task_rsys(t, SYS_munmap, n->data, UPN_DATA_SIZE, 0, 0, 0, 0, &r);
	if (n->code && n->code < (uint64_t)-4096)
		up_task_rsys(t, SYS_munmap, n->code, UPN_CODE_SIZE, 0, 0, 0, 0, &r);
	n->data = n->code = 0;
fail:
	net_tables_free(n);
	n->failed = true;
	return rc;
}

/* The index of vaddr's entry, or where it goes (-1: the table is full there). */
static int site_slot(const struct up_net *n, uint64_t vaddr, bool *found)
{
	int free_at = -1;
	uint64_t h = upn_hash(vaddr);

	*found = false;
	for (unsigned k = 0; k < UPN_PROBES; k++) {
		unsigned i = (unsigned)((h + k) & (SITES_N - 1));

		if (n->sites[i].vaddr == vaddr) {
			*found = true;
			return (int)i;
		}
		if (n->sites[i].vaddr <= 1 && free_at < 0)
			free_at = (int)i;
		if (!n->sites[i].vaddr)
			break;
	}
	return free_at;
}

static int site_write(struct up_sites *s, unsigned i)
{
	return net_write(s, sites_at(&s->net) + (uint64_t)i * sizeof(struct upn_site),
			 &s->net.sites[i], sizeof(struct upn_site));
}

/* A copy of i's instruction that runs on its own and jumps back: its slot, when the
   instruction needs no step's fixup there (a syscall's rcx, which the kernel
   overwrites anyway, aside). */
static uint64_t native_copy(const struct up_int3_site *i)
{
	if (!i->slot)
		return 0;
	if (i->rel.step && (i->rel.fixups & ~(unsigned)(UP_FIX_IP | UP_FIX_SYSCALL_RCX)))
		return 0;
	return i->slot;
}

int net_site_put(struct up_sites *s, const struct up_int3_site *i)
{
	struct up_net *n = &s->net;
	struct upn_site e = { 0 };
	bool found;
	int at;

	if (!n->installed)
		return -ENOTSUP;
	at = site_slot(n, i->bp.vaddr, &found);
	if (at < 0) {
		site_log(s->ctx,
			 "process %d: the safety net's table is full: 0x%" PRIx64 " is not covered",
			 (int)s->pid, i->bp.vaddr);
		return -ENOSPC;
	}
	e.vaddr = i->bp.vaddr;
	e.orig = i->bp.orig;
	e.slot = i->slot;
	e.copy = native_copy(i);
	e.flags = found ? n->sites[at].flags : 0;
	if (found && !memcmp(&e, &n->sites[at], sizeof(e)))
		return 0;
	n->sites[at] = e;
	return site_write(s, (unsigned)at);
}

void net_site_del(struct up_sites *s, uint64_t vaddr)
{
	struct up_net *n = &s->net;
	bool found;
	int at;

	if (!n->installed)
		return;
	at = site_slot(n, vaddr, &found);
	if (!found)
		return;
	memset(&n->sites[at], 0, sizeof(n->sites[at]));
	n->sites[at].vaddr = 1; /* a tombstone: lookups go on past it */
	site_write(s, (unsigned)at);
}

void up_site_net_pin(struct up_sites *s, uint64_t lo, uint64_t hi)
{
	struct up_net *n = &s->net;

	if (!n->installed)
		return;
	for (uint64_t v = lo; v < hi; v++) {
		bool found;
		int at;

		if (!int3_live_in(s, v, v + 1))
			continue;
		at = site_slot(n, v, &found);
		if (!found || (n->sites[at].flags & UPN_S_PINNED))
			continue;
		n->sites[at].flags |= UPN_S_PINNED;
		site_write(s, (unsigned)at);
	}
}

int up_site_net_remote(struct up_sites *s, pid_t tid, uint64_t lo, uint64_t hi,
		       const struct user_regs_struct *regs, uint64_t mask)
{
	struct upn_remote r = { 0 };
	const uint64_t at = s->net.data + offsetof(struct upn_hdr, remote);

	_Static_assert(sizeof(r.regs) == sizeof(*regs), "upn_remote's registers");
	if (!s->net.installed)
		return -ENOTSUP;
	if (!lo) {
		/* the thread is stopped with its own registers back: only the key */
		return net_write(s, at, &r.tid, sizeof(r.tid));
	}
	r.tid = (uint64_t)tid;
	r.lo = lo;
	r.hi = hi;
	r.mask = mask;
	memcpy(r.regs, regs, sizeof(r.regs));
	return net_write(s, at, &r, sizeof(r));
}

int net_ret_int3(struct up_sites *s, uint64_t at)
{
	s->net.ret_int3 = at; /* for a net installed later (net_backfill) */
	if (!s->net.installed)
		return -ENOTSUP;
	return net_write(s, s->net.data + offsetof(struct upn_hdr, ret_int3), &at, 8);
}

static bool ret_is_live(const struct up_net *n, unsigned i)
{
	return n->ret_live[i / 64] >> (i % 64) & 1;
}

static void ret_set_live(struct up_net *n, unsigned i, bool on)
{
	if (on)
		n->ret_live[i / 64] |= 1ull << (i % 64);
	else
		n->ret_live[i / 64] &= ~(1ull << (i % 64));
}

int up_site_net_ret_add(struct up_sites *s, uint64_t slot, uint64_t orig)
{
	struct up_net *n = &s->net;
	uint64_t h = upn_hash(slot);
	int at = -1;

	if (!n->installed)
		return -ENOTSUP;
	for (unsigned k = 0; k < UPN_PROBES; k++) {
		unsigned i = (unsigned)((h + k) & (RETS_N - 1));

		if (n->rets[i].slot == slot) {
			at = (int)i;
			break;
		}
		if (at < 0 && !ret_is_live(n, i))
			at = (int)i;
		if (!n->rets[i].slot)
			break;
	}
	if (at < 0) {
		if (!n->rets_full)
			site_log(s->ctx, "process %d: the safety net's table of returns is full",
				 (int)s->pid);
		n->rets_full = true;
		return -ENOSPC;
	}
	ret_set_live(n, (unsigned)at, true);
	if (n->rets[at].slot == slot && n->rets[at].orig == orig)
		return 0;
	n->rets[at].slot = slot;
	n->rets[at].orig = orig;
	return net_write(s, rets_at(n) + (uint64_t)at * sizeof(struct upn_ret), &n->rets[at],
			 sizeof(struct upn_ret));
}

void up_site_net_ret_done(struct up_sites *s, uint64_t slot)
{
	struct up_net *n = &s->net;
	uint64_t h = upn_hash(slot);

	if (!n->installed)
		return;
	for (unsigned k = 0; k < UPN_PROBES; k++) {
		unsigned i = (unsigned)((h + k) & (RETS_N - 1));

		if (n->rets[i].slot == slot) {
			ret_set_live(n, i, false); /* reused later, written then */
			return;
		}
		if (!n->rets[i].slot)
			return;
	}
}

void net_inherit(struct up_sites *child, const struct up_sites *parent)
{
	struct up_net *c = &child->net;
	const struct up_net *p = &parent->net;

	if (c->installed || c->failed || !p->installed)
		return;
	c->sites = malloc(SITES_N * sizeof(*c->sites));
	c->rets = malloc(RETS_N * sizeof(*c->rets));
	c->ret_live = malloc(RETS_N / 64 * sizeof(*c->ret_live));
	if (!c->sites || !c->rets || !c->ret_live) {
		free(c->sites);
		free(c->rets);
		free(c->ret_live);
		memset(c, 0, sizeof(*c));
		c->failed = true;
		return;
	}
	/* the fork copied the mappings, the tables and the disposition */
	memcpy(c->sites, p->sites, SITES_N * sizeof(*c->sites));
	memcpy(c->rets, p->rets, RETS_N * sizeof(*c->rets));
	memcpy(c->ret_live, p->ret_live, RETS_N / 64 * sizeof(*c->ret_live));
	c->code = p->code;
	c->data = p->data;
	c->prog = p->prog;
	c->ours = p->ours;
	c->installed = true;
}

void net_forget(struct up_sites *s)
{
	struct up_net *n = &s->net;

	free(n->sites);
	free(n->rets);
	free(n->ret_live);
	memset(n, 0, sizeof(*n));
}

int up_site_net_detach(struct up_sites *s, struct up_task *t)
{
	struct up_net *n = &s->net;
	struct upn_sigaction cur;
	int64_t r;
	int rc;

	if (!n->installed)
		return 0;
	if (!t)
		return -EAGAIN;
	/* put back only our own: a program that set another since keeps it */
	rc = up_task_rsys(t, SYS_rt_sigaction, SIGTRAP, 0, n->data + offsetof(struct upn_hdr, ours), 8, 0,
		  0, &r);
	if (!rc)
		rc = net_io(s, n->data + offsetof(struct upn_hdr, ours), &cur, sizeof(cur), false);
	if (!rc && cur.handler == n->ours.handler) {
		rc = net_write(s, n->data + offsetof(struct upn_hdr, prog), &n->prog,
			       sizeof(n->prog));
		if (!rc)
			rc = up_task_rsys(t, SYS_rt_sigaction, SIGTRAP,
				  n->data + offsetof(struct upn_hdr, prog), 0, 8, 0, 0, &r);
	}
	if (rc == -ESRCH || rc == -EAGAIN)
		return rc; /* t cannot run code now: the caller tries another */
	if (rc) {
		site_log(s->ctx, "process %d: cannot put its SIGTRAP disposition back (%s)",
			 (int)s->pid, strerror(-rc));
		return rc;
	}
	n->installed = false;
	n->ret_int3 = 0; /* the trampoline goes with the XOL area */
	up_proc_set_syscall_stub(s->p, 0);
	net_tables_free(n); /* the mappings stay listed, for the teardown to unmap */
	return 0;
}

/* Does pid catch SIGTRAP (/proc/PID/stat's sigcatch, field 34)?  1, 0, -1: cannot tell. */
static int trap_caught(pid_t pid)
{
	char path[64], buf[1024], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	/* the comm may hold spaces: count from its ')'; field 3 follows ") " */
	p = strrchr(buf, ')');
	for (int field = 3; p && field <= 34; field++)
		p = strchr(p + 1, ' ');
	if (!p)
		return -1;
	return (strtoull(p + 1, NULL, 10) >> (SIGTRAP - 1)) & 1;
}

/*
 * Costs one PTRACE_GETSIGMASK a hit, and a read of /proc/PID/stat a hit of a thread
 * with signals blocked (inside a handler, mostly).  Not seen: a trap whose thread had
 * SIGTRAP and nothing else blocked (the program's own SIGTRAP handler, run by the net
 * with SIGTRAP blocked, hitting a probe): the mask is empty by now; the next hit with a
 * mask, or the next SIGTRAP of the program's own (always), finds the reset.
 */
void up_site_net_hit(struct up_sites *s, struct up_task *t, bool always)
{
	struct up_net *n = &s->net;
	uint64_t mask;
	int64_t r;
	int rc;

	if (!n->installed)
		return;
	if (!always && (up_task_sigmask(t, &mask) || !mask))
		return;
	if (trap_caught(up_proc_pid(up_task_proc(t))) != 0)
		return;
	rc = up_task_rsys(t, SYS_rt_sigaction, SIGTRAP, n->data + offsetof(struct upn_hdr, ours), 0,
			  8, 0, 0, &r);
	if ((!n->reset++ && s->ctx->opts->verbose) || rc)
		site_log(s->ctx,
			 "process %d: thread %d trapped with SIGTRAP blocked, which reset its "
			 "disposition to the default (the kernel's rule for a forced signal): "
			 "%s",
			 (int)s->pid, (int)up_task_tid(t),
			 rc ? strerror(-rc) : "the safety net put back (said once)");
}

/*
 * The program's disposition back (up_site_net_detach) through whichever stopped thread
 * of the process can run a system call now: 0, or nonzero while ours is still
 * installed.  Under load every thread may have a stop of its own waiting at a
 * detach (an int3 hit, a timer's signal), none able to run code until it is handled:
 * the teardown lets them run and asks again; its mappings, the handler's code among
 * them, stay until this has worked.  (reliability.survive.detach: the disposition was
 * left, and the code it points at unmapped, in 5 runs of 10.)
 */
int net_put_back(struct up_sites *s)
{
	int rc = -EAGAIN;

	if (!s->net.installed)
		return 0;
	for (struct up_task *t = up_proc_first_task(s->p); t && rc; t = up_proc_next_task(t))
		if (up_task_stopped(t))
			rc = up_site_net_detach(s, t);
	return rc;
}
