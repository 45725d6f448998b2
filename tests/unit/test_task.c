/* SPDX-License-Identifier: MIT */
/*
 * The ptrace engine against real programs (tests/targets/task_victim.c): exit statuses
 * pass through unchanged, threads and children are followed, stops are told apart,
 * quiesce stops every thread, memory, text and remote system calls work.
 */
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "sym/sym.h"
#include "task/task.h"
#include "exec_check.h"

#define MAXP 8

struct rec {
	int nexit;
	pid_t exit_pid[MAXP];
	int exit_status[MAXP];
	int nthread_new, nthread_exit;
	int nfork, nvfork, nexec;
	pid_t exec_tid[MAXP];
	pid_t exec_pid[MAXP];
	int nbp, nstep, nsig;
	int last_sig, last_code;
	uint64_t bp_addr;
	uint8_t bp_orig;
	uint64_t bad_rip;
	pid_t sigstop_pid;
	bool emulate_push;	/* breakpoint on push %rbp: emulate it, keep the int3 */
	bool quiesce_in_cb;
	bool detach_children;
	int quiesce_err;
	bool check_pin;		/* at each breakpoint: the two masks below */
	int self_cpus, tracee_cpus; /* CPUs the engine thread / the tracee may run on */
	char log[1024];
};

static enum up_resume on_stop(void *ctx, struct up_task *t, const struct up_stop *s)
{
	struct rec *r = ctx;
	struct up_proc *p = up_task_proc(t);
	struct user_regs_struct regs;
	static const uint8_t int3 = 0xcc;

	switch (s->kind) {
	case UP_STOP_BREAKPOINT:
		r->nbp++;
		if (r->check_pin) {
			cpu_set_t set;

			assert_int_equal(sched_getaffinity(0, sizeof(set), &set), 0);
			r->self_cpus = CPU_COUNT(&set);
			assert_int_equal(sched_getaffinity(up_task_tid(t), sizeof(set), &set), 0);
			r->tracee_cpus = CPU_COUNT(&set);
		}
		assert_int_equal(up_task_get_regs(t, &regs), 0);
		if (regs.rip != r->bp_addr + 1) {
			r->bad_rip = regs.rip;
			return UP_RESUME_CONT;
		}
		if (r->quiesce_in_cb && r->nbp % 7 == 0) {
			/* from inside a callback: the other threads stop, their stops queue */
			int err = up_proc_quiesce(p);

			if (err)
				r->quiesce_err = err;
			for (struct up_task *o = up_proc_first_task(p); o; o = up_proc_next_task(o))
				if (!up_task_stopped(o))
					r->quiesce_err = -EAGAIN;
			up_proc_unquiesce(p);
		}
		if (r->emulate_push) {
			/* push %rbp */
			regs.rsp -= 8;
			if (up_proc_write(p, regs.rsp, &regs.rbp, 8) < 0)
				r->bad_rip = 1;
			assert_int_equal(up_task_set_regs(t, &regs), 0);
			return UP_RESUME_CONT;
		}
		/* put the original byte back, execute it, re-arm after the step */
		assert_int_equal(up_proc_write_text(p, r->bp_addr, &r->bp_orig, 1), 0);
		regs.rip = r->bp_addr;
		assert_int_equal(up_task_set_regs(t, &regs), 0);
		return UP_RESUME_STEP;
	case UP_STOP_STEP:
		r->nstep++;
		assert_int_equal(up_proc_write_text(p, r->bp_addr, &int3, 1), 0);
		return UP_RESUME_CONT;
	case UP_STOP_SIGNAL:
		r->nsig++;
		r->last_sig = s->sig;
		r->last_code = s->info.si_code;
		if (s->sig == SIGSTOP)
			r->sigstop_pid = up_task_tid(t);
		return UP_RESUME_CONT;
	}
	return UP_RESUME_CONT;
}

static void on_thread_new(void *ctx, struct up_task *parent, struct up_task *t)
{
	struct rec *r = ctx;

	assert_true(up_task_stopped(t));
	assert_int_equal(up_task_proc(parent), up_task_proc(t));
	r->nthread_new++;
}

static void on_fork(void *ctx, struct up_task *parent, struct up_proc *child, bool vfork)
{
	struct rec *r = ctx;

	assert_int_not_equal(up_proc_pid(child), up_proc_pid(up_task_proc(parent)));
	assert_non_null(up_proc_first_task(child));
	assert_true(up_task_stopped(up_proc_first_task(child)));
	if (vfork)
		r->nvfork++;
	else
		r->nfork++;
	if (r->detach_children)
		assert_int_equal(up_proc_detach(child), 0);
}

static void on_exec(void *ctx, struct up_proc *p, struct up_task *t)
{
	struct rec *r = ctx;

	if (r->nexec < MAXP) {
		r->exec_pid[r->nexec] = up_proc_pid(p);
		r->exec_tid[r->nexec] = up_task_tid(t);
	}
	r->nexec++;
}

static void on_thread_exit(void *ctx, struct up_task *t)
{
	struct rec *r = ctx;

	(void)t;
	r->nthread_exit++;
}

static void on_proc_exit(void *ctx, struct up_proc *p, int status)
{
	struct rec *r = ctx;

	if (r->nexit < MAXP) {
		r->exit_pid[r->nexit] = up_proc_pid(p);
		r->exit_status[r->nexit] = status;
	}
	r->nexit++;
}

static void on_log(void *ctx, const char *msg)
{
	struct rec *r = ctx;

	snprintf(r->log, sizeof(r->log), "%s", msg);
}

static const struct up_task_ops ops = {
	.on_stop = on_stop,
	.on_thread_new = on_thread_new,
	.on_fork = on_fork,
	.on_exec = on_exec,
	.on_thread_exit = on_thread_exit,
	.on_proc_exit = on_proc_exit,
	.log = on_log,
};

static struct up_engine *new_engine(struct rec *r)
{
	struct up_engine *e = NULL;

	memset(r, 0, sizeof(*r));
	assert_int_equal(up_engine_new(&ops, r, &e), 0);
	return e;
}

static struct up_proc *spawn(struct up_engine *e, const char *mode, const char *arg)
{
	char *argv[] = { (char *)TASK_VICTIM, (char *)mode, (char *)arg, NULL };
	struct up_proc *p = NULL;

	assert_int_equal(up_engine_spawn(e, argv, &p), 0);
	assert_non_null(p);
	return p;
}

static int status_of(struct rec *r, pid_t pid)
{
	for (int i = 0; i < r->nexit && i < MAXP; i++)
		if (r->exit_pid[i] == pid)
			return r->exit_status[i];
	fail_msg("no exit reported for %d", pid);
	return -1;
}

/* The state letter of /proc/PID/task/TID/stat. */
static char thread_state(pid_t pid, pid_t tid)
{
	char path[96], buf[512], *close;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, tid);
	f = fopen(path, "r");
	if (!f)
		return '?';
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	close = strrchr(buf, ')');
	return close && close[1] == ' ' ? close[2] : '?';
}

/* Dispatches events until pred(r) holds (bounded). */
static void dispatch_until(struct up_engine *e, struct rec *r, bool (*pred)(struct rec *, void *),
			   void *arg)
{
	struct pollfd pfd = { .fd = up_engine_fd(e), .events = POLLIN };

	assert_true(pfd.fd >= 0);
	for (int i = 0; i < 3000 && !pred(r, arg); i++) {
		poll(&pfd, 1, 10);
		assert_true(up_engine_dispatch(e) >= 0);
	}
	assert_true(pred(r, arg));
}

static bool threads_at_least(struct rec *r, void *arg)
{
	return r->nthread_new >= *(int *)arg;
}

static void test_spawn_true(void **state)
{
	struct rec r;
	struct up_engine *e = new_engine(&r);
	char *argv[] = { "true", NULL };
	struct up_proc *p = NULL;
	pid_t pid;

	(void)state;
	assert_int_equal(up_engine_spawn(e, argv, &p), 0);
	pid = up_proc_pid(p);
	assert_int_equal(up_engine_nprocs(e), 1);
	/* stopped at the exec, before the first instruction */
	assert_int_equal(thread_state(pid, pid), 't');
	assert_int_equal(up_proc_mode(p), 64);
	assert_int_equal(up_proc_resume(p), 0);
	assert_int_equal(up_engine_run(e, NULL), 0);
	assert_int_equal(r.nexit, 1);
	assert_true(WIFEXITED(status_of(&r, pid)));
	assert_int_equal(WEXITSTATUS(status_of(&r, pid)), 0);
	assert_int_equal(r.nthread_exit, 1);
	assert_int_equal(up_engine_nprocs(e), 0);
	up_engine_free(e);
}

static void test_exit_status(void **state)
{
	struct rec r;
	struct up_engine *e = new_engine(&r);
	struct up_proc *p3 = spawn(e, "exit", "3"), *ps = spawn(e, "segv", NULL);
	pid_t pid3 = up_proc_pid(p3), pids = up_proc_pid(ps);
	int st;

	(void)state;
	up_proc_resume(p3);
	up_proc_resume(ps);
	assert_int_equal(up_engine_run(e, NULL), 0);
	st = status_of(&r, pid3);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 3);
	st = status_of(&r, pids);
	assert_true(WIFSIGNALED(st));
	assert_int_equal(WTERMSIG(st), SIGSEGV);
	/* the SIGSEGV went through as a signal stop and was delivered */
	assert_int_equal(r.last_sig, SIGSEGV);
	up_engine_free(e);
}

static void test_spawn_missing(void **state)
{
	struct rec r;
	struct up_engine *e = new_engine(&r);
	char *argv[] = { "/nonexistent/program", NULL };
	struct up_proc *p = NULL;

	(void)state;
	assert_int_equal(up_engine_spawn(e, argv, &p), -ENOENT);
	assert_int_equal(up_engine_nprocs(e), 0);
	up_engine_free(e);
}

static void test_threads(void **state)
{
	struct rec r;
	struct up_engine *e = new_engine(&r);
	struct up_proc *p = spawn(e, "threads", "8");
	pid_t pid = up_proc_pid(p);

	(void)state;
	up_proc_resume(p);
	assert_int_equal(up_engine_run(e, NULL), 0);
	assert_int_equal(r.nthread_new, 8);
	assert_int_equal(r.nthread_exit, 9);
	assert_int_equal(status_of(&r, pid), 0);
	up_engine_free(e);
}

static void check_all_traced_stopped(struct up_proc *p)
{
	int n = 0;

	for (struct up_task *t = up_proc_first_task(p); t; t = up_proc_next_task(t), n++) {
		assert_true(up_task_stopped(t));
		assert_int_equal(thread_state(up_proc_pid(p), up_task_tid(t)), 't');
	}
	assert_true(n > 0);
}

static void test_quiesce_spinning(void **state)
{
	struct rec r;
	struct up_engine *e = new_engine(&r);
	struct up_proc *p = spawn(e, "spin", "4");
	pid_t pid = up_proc_pid(p); /* p is freed once the process is gone */
	int four = 4, n = 0;

	(void)state;
	up_proc_resume(p);
	dispatch_until(e, &r, threads_at_least, &four);
	usleep(20000); /* let them spin */
	assert_int_equal(up_proc_quiesce(p), 0);
	check_all_traced_stopped(p);
	/* nested */
	assert_int_equal(up_proc_quiesce(p), 0);
	up_proc_unquiesce(p);
	check_all_traced_stopped(p);
	up_proc_unquiesce(p);
	for (struct up_task *t = up_proc_first_task(p); t; t = up_proc_next_task(t), n++)
		assert_false(up_task_stopped(t));
	assert_int_equal(n, 5);
	/* and again, with every thread running */
	assert_int_equal(up_proc_quiesce(p), 0);
	check_all_traced_stopped(p);
	up_proc_unquiesce(p);
	kill(pid, SIGKILL);
	assert_int_equal(up_engine_run(e, NULL), 0);
	assert_true(WIFSIGNALED(status_of(&r, pid)));
	assert_int_equal(r.nthread_exit, 5);
	up_engine_free(e);
}

static void test_attach_running(void **state)
{
	struct rec r;
	struct up_engine *e = new_engine(&r);
	struct up_proc *p = NULL;
	pid_t pid = fork();
	int st;

	(void)state;
	if (pid == 0) {
		execl(TASK_VICTIM, TASK_VICTIM, "loop", (char *)NULL);
		_exit(127);
	}
	usleep(50000);
	assert_int_equal(up_engine_attach(e, pid, &p), 0);
	assert_non_null(up_proc_first_task(p));
	/* it keeps running */
	assert_false(up_task_stopped(up_proc_first_task(p)));
	assert_int_equal(up_proc_quiesce(p), 0);
	check_all_traced_stopped(p);
	up_proc_unquiesce(p);
	/* detach leaves it running untraced */
	assert_int_equal(up_proc_detach(p), 0);
	assert_int_equal(up_engine_nprocs(e), 0);
	usleep(10000);
	assert_int_not_equal(thread_state(pid, pid), 't');
	assert_int_equal(up_engine_attach(e, pid, &p), 0);
	kill(pid, SIGKILL);
	assert_int_equal(up_engine_run(e, NULL), 0);
	st = status_of(&r, pid);
	assert_true(WIFSIGNALED(st));
	assert_int_equal(WTERMSIG(st), SIGKILL);
	up_engine_free(e);
}

static void test_attach_errors(void **state)
{
	struct rec r;
	struct up_engine *e = new_engine(&r);
	struct up_proc *p = NULL;
	int sync[2], done[2], st;
	pid_t dead = fork(), holder;

	(void)state;
	if (dead == 0)
		_exit(0);
	waitpid(dead, &st, 0);
	assert_int_equal(up_engine_attach(e, dead, &p), -ESRCH);

	/* a holder process traces its own child with PTRACE_ATTACH */
	assert_int_equal(pipe(sync), 0);
	assert_int_equal(pipe(done), 0);
	holder = fork();
	if (holder == 0) {
		pid_t c = fork();

		if (c == 0) {
			close(sync[0]);
			close(sync[1]);
			close(done[0]);
			close(done[1]);
			alarm(20);
			for (;;)
				pause();
		}
		if (ptrace(PTRACE_ATTACH, c, 0, 0) < 0)
			_exit(1);
		waitpid(c, &st, __WALL);
		ptrace(PTRACE_CONT, c, 0, 0);
		if (write(sync[1], &c, sizeof(c)) != sizeof(c))
			_exit(1);
		close(sync[1]);
		close(done[1]);
		/* until the test closes the pipe */
		char b;
		while (read(done[0], &b, 1) > 0)
			;
		kill(c, SIGKILL);
		_exit(0);
	}
	pid_t traced;

	assert_int_equal(read(sync[0], &traced, sizeof(traced)), sizeof(traced));
	assert_int_equal(up_engine_attach(e, traced, &p), -EBUSY);
	assert_non_null(strstr(r.log, "TracerPid"));
	close(sync[0]);
	close(sync[1]);
	close(done[0]);
	close(done[1]);
	waitpid(holder, &st, 0);
	up_engine_free(e);
}

struct libc_text {
	uint64_t start, end, offset;
	char path[256];
	uint64_t want_off;
	uint64_t found;
};

static int find_by_offset(void *arg, const struct up_map *m)
{
	struct libc_text *a = arg;

	if (strcmp(m->path, a->path) || !m->x)
		return 0;
	if (a->want_off >= m->offset && a->want_off < m->offset + (m->end - m->start)) {
		a->found = m->start + (a->want_off - m->offset);
		return 1;
	}
	return 0;
}

/* The file offset of our own copy of mkfifo in libc, and the libc path. */
static void self_libc(struct libc_text *a)
{
	uint64_t addr = (uint64_t)(uintptr_t)&mkfifo;
	char line[512];
	FILE *f = fopen("/proc/self/maps", "r");

	assert_non_null(f);
	memset(a, 0, sizeof(*a));
	while (fgets(line, sizeof(line), f)) {
		unsigned long long s, en, off;
		char perms[8], path[256] = "";

		if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %255s", &s, &en, perms, &off, path) < 4)
			continue;
		if (addr >= s && addr < en) {
			a->want_off = addr - s + off;
			snprintf(a->path, sizeof(a->path), "%s", path);
		}
	}
	fclose(f);
	assert_true(a->path[0] != 0);
}

static void test_write_text_private(void **state)
{
	struct rec r;
	struct up_engine *e = new_engine(&r);
	struct up_proc *a = spawn(e, "loop", NULL), *b = spawn(e, "loop", NULL);
	struct libc_text la, lb;
	uint8_t orig_a, orig_b, got, int3 = 0xcc;

	(void)state;
	/* run both to main (libc mapped) */
	up_proc_resume(a);
	up_proc_resume(b);
	usleep(50000);
	self_libc(&la);
	lb = la;
	assert_int_equal(up_proc_for_each_map(a, find_by_offset, &la), 1);
	assert_int_equal(up_proc_for_each_map(b, find_by_offset, &lb), 1);
	assert_int_equal(up_proc_read(a, la.found, &orig_a, 1), 0);
	assert_int_equal(up_proc_read(b, lb.found, &orig_b, 1), 0);
	assert_int_equal(orig_a, *(uint8_t *)&mkfifo);
	assert_int_equal(orig_b, orig_a);
	/* plain data writes cannot touch read-only text; text writes can */
	assert_int_equal(up_proc_write_text(a, la.found, &int3, 1), 0);
	assert_int_equal(up_proc_read(a, la.found, &got, 1), 0);
	assert_int_equal(got, 0xcc);
	assert_int_equal(up_proc_read(b, lb.found, &got, 1), 0);
	assert_int_equal(got, orig_b);
	assert_int_equal(*(volatile uint8_t *)&mkfifo, orig_a);
	assert_int_equal(up_proc_write_text(a, la.found, &orig_a, 1), 0);
	assert_int_equal(up_proc_read(a, la.found, &got, 1), 0);
	assert_int_equal(got, orig_a);
	kill(up_proc_pid(a), SIGKILL);
	kill(up_proc_pid(b), SIGKILL);
	assert_int_equal(up_engine_run(e, NULL), 0);
	assert_int_equal(r.nexit, 2);
	up_engine_free(e);
}

/* t's registers are still *before; the process then runs to its exit status 3. */
static void regs_kept_exit3(struct up_engine *e, struct rec *r, struct up_task *t,
			    const struct user_regs_struct *before)
{
	struct up_proc *p = up_task_proc(t);
	struct user_regs_struct after;
	pid_t pid = up_proc_pid(p);

	assert_int_equal(up_task_get_regs(t, &after), 0);
	assert_memory_equal(before, &after, sizeof(after));
	up_proc_resume(p);
	assert_int_equal(up_engine_run(e, NULL), 0);
	assert_int_equal(WEXITSTATUS(status_of(r, pid)), 3);
	up_engine_free(e);
}

static void test_remote_syscall(void **state)
{
	struct rec r;
	struct up_engine *e = new_engine(&r);
	struct up_proc *p = spawn(e, "exit", "3");
	struct up_task *t = up_proc_first_task(p);
	struct user_regs_struct before;
	struct up_map m;
	uint64_t args[6] = { 0 };
	int64_t ret = 0;
	uint32_t word = 0x12345678, back = 0;
	pid_t pid = up_proc_pid(p);

	(void)state;
	/* from the exec stop (inside execve) */
	assert_int_equal(up_task_get_regs(t, &before), 0);
	assert_int_equal(up_task_syscall(t, SYS_getpid, args, &ret), 0);
	assert_int_equal(ret, pid);
	assert_int_equal(up_task_syscall(t, SYS_gettid, args, &ret), 0);
	assert_int_equal(ret, pid);
	args[0] = 0;
	args[1] = 8192;
	args[2] = PROT_READ | PROT_WRITE;
	args[3] = MAP_PRIVATE | MAP_ANONYMOUS;
	args[4] = (uint64_t)-1;
	args[5] = 0;
	assert_int_equal(up_task_syscall(t, SYS_mmap, args, &ret), 0);
	assert_true(ret > 0 && (ret & 0xfff) == 0);
	uint64_t addr = (uint64_t)ret;

	assert_int_equal(up_proc_find_map(p, addr, &m), 0);
	assert_int_equal(m.start, addr);
	assert_int_equal(m.end, addr + 8192);
	assert_true(m.r && m.w && !m.x && !m.shared);
	assert_int_equal(up_proc_write(p, addr + 100, &word, sizeof(word)), 0);
	assert_int_equal(up_proc_read(p, addr + 100, &back, sizeof(back)), 0);
	assert_int_equal(back, word);
	memset(args, 0, sizeof(args));
	args[0] = addr;
	args[1] = 8192;
	assert_int_equal(up_task_syscall(t, SYS_munmap, args, &ret), 0);
	assert_int_equal(ret, 0);
	assert_int_equal(up_proc_find_map(p, addr, &m), -ENOENT);
	/* an error comes back as -errno in *ret */
	args[0] = 1;
	args[1] = 4096;
	assert_int_equal(up_task_syscall(t, SYS_munmap, args, &ret), 0);
	assert_int_equal(ret, -EINVAL);
	regs_kept_exit3(e, &r, t, &before);
}

/*
 * Code of ours run in the process (up_task_call): a loop that writes a byte in each page
 * of a range, ending in int3, changes the memory and leaves every register as it was;
 * code that faults comes back -EFAULT, registers put back, and the process runs on
 * unharmed to its own exit status.
 */
static void test_remote_call(void **state)
{
	/* 1: movb $7,(%rdi); add $4096,%rdi; cmp %rsi,%rdi; jb 1b; int3 */
	static const uint8_t touch[] = { 0xc6, 0x07, 0x07, 0x48, 0x81, 0xc7, 0x00, 0x10, 0x00,
					 0x00, 0x48, 0x39, 0xf7, 0x72, 0xf1, 0xcc };
	/* movb $1,(%rdi); int3 -- with rdi 0 */
	static const uint8_t fault[] = { 0xc6, 0x07, 0x01, 0xcc };
	struct rec r;
	struct up_engine *e = new_engine(&r);
	struct up_proc *p = spawn(e, "exit", "3");
	struct up_task *t = up_proc_first_task(p);
	struct user_regs_struct before, after;
	uint64_t args[6] = { 0, 4 * 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
			     MAP_PRIVATE | MAP_ANONYMOUS, (uint64_t)-1, 0 };
	int64_t ret = 0;
	uint8_t b;

	(void)state;
	assert_int_equal(up_task_get_regs(t, &before), 0);
	assert_int_equal(up_task_syscall(t, SYS_mmap, args, &ret), 0);
	assert_true(ret > 0);
	uint64_t code = (uint64_t)ret, data = code + 4096;

	assert_int_equal(up_proc_write(p, code, touch, sizeof(touch)), 0);
	assert_int_equal(up_proc_write(p, code + 64, fault, sizeof(fault)), 0);
	assert_int_equal(up_task_call(t, code, code + sizeof(touch), data, data + 3 * 4096), 0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(up_proc_read(p, data + (uint64_t)i * 4096, &b, 1), 0);
		assert_int_equal(b, 7);
		assert_int_equal(up_proc_read(p, data + (uint64_t)i * 4096 + 1, &b, 1), 0);
		assert_int_equal(b, 0);
	}
	assert_int_equal(up_task_get_regs(t, &after), 0);
	assert_memory_equal(&before, &after, sizeof(before));
	assert_int_equal(up_task_call(t, code + 64, code + 64 + sizeof(fault), 0, 0), -EFAULT);
	regs_kept_exit3(e, &r, t, &before);
}

/*
 * Several system calls in one remote run (up_task_syscalls): the kernel's own answers
 * (the child's pid as fork gave it, a descriptor dup made and close takes), an earlier
 * call's result passed on, the first failure ending the run and the calls after it not
 * run; the same from the one-by-one path (no code place); registers, and the exit
 * status, as they were.
 */
static void test_remote_syscalls(void **state)
{
	struct rec r;
	struct up_engine *e = new_engine(&r);
	struct up_proc *p = spawn(e, "exit", "3");
	struct up_task *t = up_proc_first_task(p);
	struct user_regs_struct before, after;
	uint64_t args[6] = { 0, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS,
			     (uint64_t)-1, 0 };
	int64_t ret = 0;

	(void)state;
	assert_int_equal(up_task_get_regs(t, &before), 0);
	assert_int_equal(up_task_syscall(t, SYS_mmap, args, &ret), 0);
	assert_true(ret > 0);
	for (int pass = 0; pass < 2; pass++) {
		uint64_t code = pass ? 0 : (uint64_t)ret;
		struct up_task_rsys c[6] = {
			{ .nr = SYS_getpid },
			{ .nr = SYS_dup, .args = { 1 } },
			{ .nr = SYS_fcntl, .args = { 0, F_GETFD }, .from = { 2 } },
			{ .nr = SYS_close, .from = { 2 } },
			{ .nr = SYS_close, .from = { 2 } }, /* again: EBADF, the end */
			{ .nr = SYS_getpid },
		};

		assert_int_equal(up_task_syscalls(t, code, c, 6), 0);
		assert_int_equal(c[0].ret, up_proc_pid(p));
		assert_true(c[1].ret > 2);
		assert_int_equal(c[2].ret, 0); /* dup's descriptor, open, no FD_CLOEXEC */
		assert_int_equal(c[3].ret, 0);
		assert_int_equal(c[4].ret, -EBADF);
		assert_int_equal(c[5].ret, -ECANCELED);
		assert_int_equal(up_task_get_regs(t, &after), 0);
		assert_memory_equal(&before, &after, sizeof(before));
	}
	for (int pass = 0; pass < 2; pass++) {
		/* seven, the last one's result kept in rax: the parent is this test */
		struct up_task_rsys c[7] = {
			{ .nr = SYS_getpid }, { .nr = SYS_getpid }, { .nr = SYS_getpid },
			{ .nr = SYS_getpid }, { .nr = SYS_getpid }, { .nr = SYS_dup, .args = { 1 } },
			{ .nr = SYS_close, .from = { 6 } },
		};

		assert_int_equal(up_task_syscalls(t, pass ? 0 : (uint64_t)ret, c, 7), 0);
		for (int k = 0; k < 5; k++)
			assert_int_equal(c[k].ret, up_proc_pid(p));
		assert_true(c[5].ret > 2);
		assert_int_equal(c[6].ret, 0);
		c[5] = (struct up_task_rsys){ .nr = SYS_close, .args = { 1000 } }; /* EBADF */
		c[6] = (struct up_task_rsys){ .nr = SYS_getppid };
		assert_int_equal(up_task_syscalls(t, pass ? 0 : (uint64_t)ret, c, 7), 0);
		assert_int_equal(c[5].ret, -EBADF);
		assert_int_equal(c[6].ret, -ECANCELED);
		c[5] = (struct up_task_rsys){ .nr = SYS_getpid };
		assert_int_equal(up_task_syscalls(t, pass ? 0 : (uint64_t)ret, c, 7), 0);
		assert_int_equal(c[6].ret, getpid());
	}
	{
		/* a result only from an earlier call */
		struct up_task_rsys bad[1] = { { .nr = SYS_close, .from = { 1 } } };

		assert_int_equal(up_task_syscalls(t, (uint64_t)ret, bad, 1), -EINVAL);
	}
	regs_kept_exit3(e, &r, t, &before);
}

/* A chain: getpid, an mmap, then (the tracer writing into the page between) a write
   of it to /dev/null-like fd 1000 (EBADF), then the end after hearing it. */
struct chain_rec {
	struct up_proc *p;
	int64_t got[8];
	unsigned asked;
	uint64_t page;
	int wrote;
};

static bool chain_fn(void *arg, unsigned k, int64_t prev, long *nr, uint64_t a[6])
{
	struct chain_rec *c = arg;
	static const char word[] = "chain";

	c->asked = k + 1;
	if (k)
		c->got[k - 1] = prev;
	switch (k) {
	case 0:
		*nr = SYS_getpid;
		return true;
	case 1:
		*nr = SYS_mmap;
		a[1] = 4096, a[2] = PROT_READ | PROT_WRITE, a[3] = MAP_PRIVATE | MAP_ANONYMOUS;
		a[4] = (uint64_t)-1;
		return true;
	case 2:
		c->page = (uint64_t)prev;
		c->wrote = up_proc_write(c->p, c->page, word, sizeof(word));
		*nr = SYS_write; /* the page's bytes, to a descriptor it does not have */
		a[0] = 1000, a[1] = c->page, a[2] = sizeof(word);
		return true;
	case 3:
		*nr = SYS_munmap;
		a[0] = c->page, a[1] = 4096;
		return true;
	default:
		return false;
	}
}

/*
 * System calls in one run with the tracer's work between them (up_task_syscall_chain,
 * the safety net's installation): each call's result reaches the next step, memory
 * written between calls is there for the next, a failed call's -errno comes back as
 * its result, the last result is heard too; registers, and the exit status, as they
 * were -- from the exec stop (the chain through the rescue stub), then one call after
 * the other through a syscall stub (where the chain cannot run: the net's own stub).
 */
static void test_remote_syscall_chain(void **state)
{
	struct rec r;
	struct up_engine *e = new_engine(&r);
	struct up_proc *p = spawn(e, "exit", "3");
	struct up_task *t = up_proc_first_task(p);
	struct user_regs_struct before, after;
	struct up_map m;

	static const uint8_t stub[] = { 0x0f, 0x05, 0xcc, 0xeb, 0xfd };
	uint64_t args[6] = { 0, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS,
			     (uint64_t)-1, 0 };
	int64_t code = 0;

	(void)state;
	assert_int_equal(up_task_get_regs(t, &before), 0);
	for (int pass = 0; pass < 2; pass++) {
		struct chain_rec c = { .p = p };

		if (pass) {
			assert_int_equal(up_task_syscall(t, SYS_mmap, args, &code), 0);
			assert_true(code > 0);
			assert_int_equal(up_proc_write_text(p, (uint64_t)code, stub, sizeof(stub)), 0);
			up_proc_set_syscall_stub(p, (uint64_t)code);
		}
		assert_int_equal(up_task_syscall_chain(t, chain_fn, &c), 0);
		assert_int_equal(c.asked, 5);
		assert_int_equal(c.got[0], up_proc_pid(p));
		assert_true(c.got[1] > 0 && (c.got[1] & 0xfff) == 0);
		assert_int_equal(c.wrote, 0);
		assert_int_equal(c.got[2], -EBADF);
		assert_int_equal(c.got[3], 0);
		assert_int_equal(up_proc_find_map(p, c.page, &m), -ENOENT);
		assert_int_equal(up_task_get_regs(t, &after), 0);
		assert_memory_equal(&before, &after, sizeof(before));
	}
	up_proc_set_syscall_stub(p, 0);
	regs_kept_exit3(e, &r, t, &before);
}

/* straight from the process's memory, not through the engine */
static uint8_t peek_mem(pid_t pid, uint64_t addr)
{
	char path[64];
	uint8_t byte = 0;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &byte, 1, (off_t)addr), 1);
	close(fd);
	return byte;
}

/*
 * Writes while quiesced go through the engine's page cache: the engine reads them back
 * at once, a remote system call meanwhile runs, and they are in the process's memory
 * when its threads run again.
 */
static void test_text_cache(void **state)
{
	struct rec r;
	struct up_engine *e = new_engine(&r);
	struct up_proc *p = spawn(e, "spin", "2");
	struct up_sym_elf *elf = NULL;
	struct up_sym sym;
	uint8_t orig, got, int3 = 0xcc;
	uint64_t args[6] = { 0 };
	int64_t ret = 0;
	int two = 2;
	pid_t pid = up_proc_pid(p);

	(void)state;
	assert_int_equal(up_sym_elf_open(TASK_VICTIM, &elf), 0);
	assert_int_equal(up_sym_elf_lookup(elf, "bp_target", &sym), 0); /* spin never calls it */
	up_sym_elf_close(elf);
	up_proc_resume(p);
	dispatch_until(e, &r, threads_at_least, &two);
	assert_int_equal(up_proc_quiesce(p), 0);
	assert_int_equal(up_proc_read(p, sym.value, &orig, 1), 0);
	assert_int_not_equal(orig, 0xcc);
	assert_int_equal(up_proc_write_text(p, sym.value, &int3, 1), 0);
	assert_int_equal(up_proc_read(p, sym.value, &got, 1), 0);
	assert_int_equal(got, 0xcc);
	assert_int_equal(up_task_syscall(up_proc_first_task(p), SYS_gettid, args, &ret), 0);
	assert_int_equal(ret, pid);
	assert_int_equal(up_proc_read(p, sym.value, &got, 1), 0);
	assert_int_equal(got, 0xcc);
	up_proc_unquiesce(p);
	assert_int_equal(peek_mem(pid, sym.value), 0xcc);
	assert_int_equal(up_proc_quiesce(p), 0);
	assert_int_equal(up_proc_write_text(p, sym.value, &orig, 1), 0);
	up_proc_unquiesce(p);
	assert_int_equal(peek_mem(pid, sym.value), orig);
	kill(pid, SIGKILL);
	assert_int_equal(up_engine_run(e, NULL), 0);
	up_engine_free(e);
}

static void test_remote_syscall_quiesced(void **state)
{
	struct rec r;
	struct up_engine *e = new_engine(&r);
	struct up_proc *p = spawn(e, "spin", "2");
	struct user_regs_struct before, after;
	uint64_t args[6] = { 0 };
	int64_t ret = 0;
	int two = 2;

	(void)state;
	up_proc_resume(p);
	dispatch_until(e, &r, threads_at_least, &two);
	usleep(10000);
	assert_int_equal(up_proc_quiesce(p), 0);
	for (struct up_task *t = up_proc_first_task(p); t; t = up_proc_next_task(t)) {
		assert_int_equal(up_task_get_regs(t, &before), 0);
		assert_int_equal(up_task_syscall(t, SYS_gettid, args, &ret), 0);
		assert_int_equal(ret, up_task_tid(t));
		assert_int_equal(up_task_get_regs(t, &after), 0);
		assert_memory_equal(&before, &after, sizeof(before));
	}
	up_proc_unquiesce(p);
	kill(up_proc_pid(p), SIGKILL);
	assert_int_equal(up_engine_run(e, NULL), 0);
	up_engine_free(e);
}

static void test_breakpoint_step(void **state)
{
	struct rec r;
	struct up_engine *e = new_engine(&r);
	struct up_sym_elf *elf = NULL;
	struct up_sym sym;
	struct up_proc *p;
	uint8_t int3 = 0xcc;
	pid_t pid;

	(void)state;
	assert_int_equal(up_sym_elf_open(TASK_VICTIM, &elf), 0);
	assert_int_equal(up_sym_elf_lookup(elf, "bp_target", &sym), 0);
	up_sym_elf_close(elf);
	p = spawn(e, "bp", NULL);
	pid = up_proc_pid(p);
	r.bp_addr = sym.value;
	assert_int_equal(up_proc_read(p, r.bp_addr, &r.bp_orig, 1), 0);
	assert_int_equal(up_proc_write_text(p, r.bp_addr, &int3, 1), 0);
	up_proc_resume(p);
	assert_int_equal(up_engine_run(e, NULL), 0);
	assert_int_equal(r.bad_rip, 0);
	assert_int_equal(r.nbp, 5);
	assert_int_equal(r.nstep, 5);
	assert_int_equal(r.nsig, 0);
	assert_true(WIFEXITED(status_of(&r, pid)));
	assert_int_equal(WEXITSTATUS(status_of(&r, pid)), 0);
	up_engine_free(e);
}

/*
 * Placement (UPROBE_PIN=1): at a stop the engine thread runs on one CPU (its tracee's),
 * the traced program keeps the mask it was started with, the engine thread's own mask is
 * back when the program is gone; by default the engine thread is left alone.
 */
static void run_bp_pinned(struct rec *r, struct up_engine *e, const cpu_set_t *mine)
{
	struct up_sym_elf *elf = NULL;
	struct up_sym sym;
	struct up_proc *p;
	cpu_set_t after;

	assert_int_equal(up_sym_elf_open(TASK_VICTIM, &elf), 0);
	assert_int_equal(up_sym_elf_lookup(elf, "bp_target", &sym), 0);
	up_sym_elf_close(elf);
	r->check_pin = true;
	r->emulate_push = false;
	p = spawn(e, "bp", NULL);
	r->bp_addr = sym.value;
	assert_int_equal(up_proc_read(p, r->bp_addr, &r->bp_orig, 1), 0);
	assert_int_equal(up_proc_write_text(p, r->bp_addr, &(uint8_t){ 0xcc }, 1), 0);
	up_proc_resume(p);
	assert_int_equal(up_engine_run(e, NULL), 0);
	assert_int_equal(r->nbp, 5);
	assert_int_equal(r->tracee_cpus, CPU_COUNT(mine));
	assert_int_equal(sched_getaffinity(0, sizeof(after), &after), 0);
	assert_true(CPU_EQUAL(&after, mine));
}

static void test_placement(void **state)
{
	struct rec r;
	struct up_engine *e;
	cpu_set_t mine;

	(void)state;
	assert_int_equal(sched_getaffinity(0, sizeof(mine), &mine), 0);
	if (CPU_COUNT(&mine) < 2)
		skip();
	setenv("UPROBE_PIN", "1", 1);
	e = new_engine(&r);
	unsetenv("UPROBE_PIN");
	run_bp_pinned(&r, e, &mine);
	assert_int_equal(r.self_cpus, 1);
	/* the mask came back with the first program gone: a second one is placed again */
	memset(&r, 0, sizeof(r));
	run_bp_pinned(&r, e, &mine);
	assert_int_equal(r.self_cpus, 1);
	up_engine_free(e);

	e = new_engine(&r);
	run_bp_pinned(&r, e, &mine);
	assert_int_equal(r.self_cpus, CPU_COUNT(&mine));
	up_engine_free(e);
}

static void test_breakpoint_threads_quiesce(void **state)
{
	struct rec r;
	struct up_engine *e = new_engine(&r);
	struct up_sym_elf *elf = NULL;
	struct up_sym sym;
	struct up_proc *p;
	struct pollfd pfd = { .fd = up_engine_fd(e), .events = POLLIN };
	uint8_t int3 = 0xcc;
	pid_t pid;
	int cycles = 0;

	(void)state;
	assert_int_equal(up_sym_elf_open(TASK_VICTIM, &elf), 0);
	assert_int_equal(up_sym_elf_lookup(elf, "bp_target", &sym), 0);
	up_sym_elf_close(elf);
	p = spawn(e, "bpthreads", "4");
	pid = up_proc_pid(p);
	r.bp_addr = sym.value;
	r.emulate_push = true;
	r.quiesce_in_cb = true;
	assert_int_equal(up_proc_read(p, r.bp_addr, &r.bp_orig, 1), 0);
	assert_int_equal(r.bp_orig, 0x55);
	assert_int_equal(up_proc_write_text(p, r.bp_addr, &int3, 1), 0);
	up_proc_resume(p);
	/* quiesce from the event loop too, while threads hit the breakpoint */
	while (r.nexit == 0) {
		poll(&pfd, 1, 1);
		assert_true(up_engine_dispatch(e) >= 0);
		if (r.nexit == 0 && up_proc_quiesce(p) == 0) {
			for (struct up_task *t = up_proc_first_task(p); t; t = up_proc_next_task(t))
				assert_true(up_task_stopped(t));
			cycles++;
		}
		if (r.nexit == 0)
			up_proc_unquiesce(p);
		assert_true(cycles < 100000);
	}
	assert_int_equal(r.bad_rip, 0);
	assert_int_equal(r.quiesce_err, 0);
	assert_int_equal(r.nbp, 4 * 200);
	assert_int_equal(r.nsig, 0);
	assert_int_equal(r.nthread_new, 4);
	assert_true(cycles > 0);
	assert_int_equal(WEXITSTATUS(status_of(&r, pid)), 0);
	up_engine_free(e);
}

static void test_engine_free_detaches(void **state)
{
	struct rec r;
	struct up_engine *e = new_engine(&r);
	struct up_proc *p = spawn(e, "spin", "2");
	pid_t pid = up_proc_pid(p);
	int two = 2, st;
	char path[64], line[256];
	long tracer = -1;
	FILE *f;

	(void)state;
	up_proc_resume(p);
	dispatch_until(e, &r, threads_at_least, &two);
	assert_int_equal(up_proc_quiesce(p), 0);
	up_engine_free(e);
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		sscanf(line, "TracerPid: %ld", &tracer);
	fclose(f);
	assert_int_equal(tracer, 0);
	usleep(10000);
	assert_int_not_equal(thread_state(pid, pid), 't');
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFSIGNALED(st));
	assert_int_equal(WTERMSIG(st), SIGKILL);
}

#ifdef TASK_TARGET32
static void test_remote_syscall_32(void **state)
{
	struct rec r;
	struct up_engine *e = new_engine(&r);
	char *argv[] = { (char *)TASK_TARGET32, NULL };
	struct up_proc *p = NULL;
	struct user_regs_struct before, after;
	uint64_t args[6] = { 0 };
	int64_t ret = 0;

	(void)state;
	if (!test_can_exec(argv[0])) {
		up_engine_free(e);
		skip();
	}
	assert_int_equal(up_engine_spawn(e, argv, &p), 0);
	assert_int_equal(up_proc_mode(p), 32);
	struct up_task *t = up_proc_first_task(p);

	assert_int_equal(up_task_get_regs(t, &before), 0);
	assert_int_equal(up_task_syscall(t, 20 /* getpid, i386 */, args, &ret), 0);
	assert_int_equal(ret, up_proc_pid(p));
	/* an error: close(-1) */
	args[0] = (uint32_t)-1;
	assert_int_equal(up_task_syscall(t, 6 /* close, i386 */, args, &ret), 0);
	assert_int_equal(ret, -EBADF);
	assert_int_equal(up_task_get_regs(t, &after), 0);
	assert_memory_equal(&before, &after, sizeof(before));
	up_proc_resume(p);
	assert_int_equal(up_engine_run(e, NULL), 0);
	assert_int_equal(r.nexit, 1);
	assert_true(WIFEXITED(r.exit_status[0]));
	assert_int_equal(WEXITSTATUS(r.exit_status[0]), 0);
	up_engine_free(e);
}
#endif

static void test_own_sigtrap(void **state)
{
	struct rec r;
	struct up_engine *e = new_engine(&r);
	struct up_proc *p = spawn(e, "sigtrap", NULL);
	pid_t pid = up_proc_pid(p);

	(void)state;
	up_proc_resume(p);
	assert_int_equal(up_engine_run(e, NULL), 0);
	assert_int_equal(r.nbp, 0);
	assert_int_equal(r.nstep, 0);
	assert_int_equal(r.nsig, 1);
	assert_int_equal(r.last_sig, SIGTRAP);
	assert_int_equal(r.last_code, SI_TKILL);
	/* delivered to its handler: the program says so */
	assert_int_equal(WEXITSTATUS(status_of(&r, pid)), 0);
	up_engine_free(e);
}

static bool exited(struct rec *r, void *arg)
{
	(void)arg;
	return r->nexit > 0;
}

static void test_group_stop(void **state)
{
	struct rec r;
	struct up_engine *e = new_engine(&r);
	struct up_proc *p = spawn(e, "sigstop", NULL);
	pid_t pid = up_proc_pid(p);
	struct pollfd pfd = { .fd = up_engine_fd(e), .events = POLLIN };
	int i;

	(void)state;
	up_proc_resume(p);
	/* it stops itself (its SIGSTOP is delivered) and stays stopped, as untraced */
	for (i = 0; i < 1000 && r.sigstop_pid != pid; i++) {
		poll(&pfd, 1, 5);
		up_engine_dispatch(e);
	}
	assert_int_equal(r.sigstop_pid, pid);
	for (i = 0; i < 10; i++) {
		poll(&pfd, 1, 5);
		up_engine_dispatch(e);
	}
	assert_int_equal(r.nexit, 0);
	assert_int_equal(thread_state(pid, pid), 't');
	/* quiesce and unquiesce keep it stopped */
	assert_int_equal(up_proc_quiesce(p), 0);
	check_all_traced_stopped(p);
	up_proc_unquiesce(p);
	for (i = 0; i < 10; i++) {
		poll(&pfd, 1, 5);
		up_engine_dispatch(e);
	}
	assert_int_equal(r.nexit, 0);
	kill(pid, SIGCONT);
	dispatch_until(e, &r, exited, NULL);
	assert_int_equal(WEXITSTATUS(status_of(&r, pid)), 4);
	up_engine_free(e);
}

static void test_fork_vfork_exec(void **state)
{
	struct rec r;
	struct up_engine *e = new_engine(&r);
	struct up_proc *p = spawn(e, "fork", NULL);
	pid_t pid = up_proc_pid(p);

	(void)state;
	up_proc_resume(p);
	assert_int_equal(up_engine_run(e, NULL), 0);
	assert_int_equal(r.nfork, 1);
	assert_int_equal(r.nvfork, 1);
	assert_int_equal(r.nexec, 1); /* the vfork child's exec of /bin/true */
	assert_int_equal(r.nexit, 3);
	assert_int_not_equal(r.exec_pid[0], pid);
	assert_int_equal(WEXITSTATUS(status_of(&r, pid)), 0);
	assert_int_equal(WEXITSTATUS(status_of(&r, r.exec_pid[0])), 0);
	up_engine_free(e);
}

static void test_fork_detach_child(void **state)
{
	struct rec r;
	struct up_engine *e = new_engine(&r);
	struct up_proc *p = spawn(e, "fork", NULL);
	pid_t pid = up_proc_pid(p);

	(void)state;
	r.detach_children = true;
	up_proc_resume(p);
	assert_int_equal(up_engine_run(e, NULL), 0);
	assert_int_equal(r.nfork, 1);
	assert_int_equal(r.nvfork, 1);
	assert_int_equal(r.nexec, 0);
	assert_int_equal(r.nexit, 1);
	/* the children ran untraced and exited as they should: the parent checked */
	assert_int_equal(WEXITSTATUS(status_of(&r, pid)), 0);
	up_engine_free(e);
}

static void test_exec_from_thread(void **state)
{
	struct rec r;
	struct up_engine *e = new_engine(&r);
	struct up_proc *p = spawn(e, "execthread", NULL);
	pid_t pid = up_proc_pid(p);

	(void)state;
	up_proc_resume(p);
	assert_int_equal(up_engine_run(e, NULL), 0);
	assert_int_equal(r.nthread_new, 1);
	assert_int_equal(r.nexec, 1);
	assert_int_equal(r.exec_pid[0], pid);
	assert_int_equal(r.exec_tid[0], pid);
	assert_int_equal(r.nexit, 1);
	assert_int_equal(WEXITSTATUS(status_of(&r, pid)), 7);
	up_engine_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spawn_true),
		cmocka_unit_test(test_exit_status),
		cmocka_unit_test(test_spawn_missing),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_quiesce_spinning),
		cmocka_unit_test(test_attach_running),
		cmocka_unit_test(test_attach_errors),
		cmocka_unit_test(test_write_text_private),
		cmocka_unit_test(test_remote_syscall),
		cmocka_unit_test(test_remote_call),
		cmocka_unit_test(test_remote_syscalls),
		cmocka_unit_test(test_remote_syscall_chain),
		cmocka_unit_test(test_remote_syscall_quiesced),
		cmocka_unit_test(test_text_cache),
		cmocka_unit_test(test_breakpoint_step),
		cmocka_unit_test(test_placement),
		cmocka_unit_test(test_breakpoint_threads_quiesce),
		cmocka_unit_test(test_engine_free_detaches),
#ifdef TASK_TARGET32
		cmocka_unit_test(test_remote_syscall_32),
#endif
		cmocka_unit_test(test_own_sigtrap),
		cmocka_unit_test(test_group_stop),
		cmocka_unit_test(test_fork_vfork_exec),
		cmocka_unit_test(test_fork_detach_child),
		cmocka_unit_test(test_exec_from_thread),
	};

	alarm(100);
	if (getenv("TASK_TEST"))
		cmocka_set_test_filter(getenv("TASK_TEST"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
