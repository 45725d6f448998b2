/* SPDX-License-Identifier: MIT */
/*
 * core_fork MODE [K]: process and thread creation and exit while probes live.  Each
 * mode calls probed_fork_work() a known number of times in each process or thread and
 * prints only what does not depend on scheduling:
 *   fork        parent K calls, fork; child K calls, exits 3; parent waits, K calls
 *   vfork       vfork; child K calls, _exit(4); parent K calls
 *   vfork-exec  vfork; child execs /bin/true; parent K calls
 *   exec        K calls, then execs itself as "exec-child": K calls there
 *   clone       a raw clone() thread (no pthread): K calls in it, K in the leader
 *   clone-vm    clone(CLONE_VM) without CLONE_THREAD: a process sharing our memory
 *               makes K calls while the parent waits for it
 *   thread-exit 4 pthreads make K calls each; one leaves early by pthread_exit while
 *               the others still run; the leader makes K calls
 *   leader-exit the leader pthread_exit()s while 2 threads make K calls each; the last
 *               one prints and exits the process with status 5
 * Hits at probed_fork_work, per process: fork 2K in the parent, K in the child;
 * vfork K + K (the child's in the shared memory); vfork-exec K; exec K, then K in the
 * new image; clone 2K; clone-vm K + K; thread-exit 4K + K/2; leader-exit 2K + 1.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/futex.h>
#include <unistd.h>

int g_seed = 12345;
volatile unsigned g_sink;

__attribute__((noipa, used)) unsigned probed_fork_work(unsigned x)
{
	unsigned y = x * 2654435761u + (unsigned)g_seed;

	g_sink = y;
	return y ^ (y >> 13);
}

static unsigned run_k(unsigned base, int k)
{
	unsigned sum = 0;

	for (int i = 0; i < k; i++)
		sum += probed_fork_work(base + (unsigned)i);
	return sum;
}

static int wait_child(pid_t pid, const char *what)
{
	int status;

	if (waitpid(pid, &status, __WALL) != pid) {
		perror("waitpid");
		return -1;
	}
	if (WIFEXITED(status))
		printf("%s exited %d\n", what, WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		printf("%s killed by signal %d\n", what, WTERMSIG(status));
	return 0;
}

/* ---- clone ------------------------------------------------------------------------- */

static volatile unsigned g_clone_sum;
static volatile pid_t g_clone_tid = 1; /* CLONE_CHILD_CLEARTID zeroes it */
static int g_k;

static int clone_fn(void *arg)
{
	g_clone_sum = run_k((unsigned)(unsigned long)arg, g_k);
	return 0; /* glibc's clone() ends the thread with SYS_exit, not exit_group */
}

static void futex_wait_zero(volatile pid_t *p)
{
	pid_t v;

	while ((v = __atomic_load_n(p, __ATOMIC_ACQUIRE)) != 0)
		syscall(SYS_futex, p, FUTEX_WAIT, v, NULL, NULL, 0);
}

static int mode_clone(int k, int share_thread)
{
	size_t stack_size = 256 * 1024;
	char *stack = malloc(stack_size);
	int flags;
	pid_t tid;

	if (!stack)
		return 1;
	g_k = k;
	if (share_thread)
		flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
			CLONE_SYSVSEM | CLONE_CHILD_CLEARTID;
	else
		flags = CLONE_VM | SIGCHLD;
	tid = clone(clone_fn, stack + stack_size, flags, (void *)1000UL, NULL, NULL,
		    &g_clone_tid);
	if (tid < 0) {
		perror("clone");
		return 1;
	}
	if (share_thread) {
		unsigned mine = run_k(0, k);

		futex_wait_zero(&g_clone_tid);
		printf("clone thread sum=%u leader sum=%u\n", g_clone_sum, mine);
	} else {
		if (wait_child(tid, "clone-vm child"))
			return 1;
		printf("clone-vm child sum=%u\n", g_clone_sum);
		printf("parent sum=%u\n", run_k(0, k));
	}
	return 0;
}

/* ---- threads ----------------------------------------------------------------------- */

struct worker {
	pthread_t th;
	int index, k, early;
	unsigned sum;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;
static int g_live;
static struct worker g_workers[4];

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	if (w->early) {
		w->sum = run_k((unsigned)w->index * 100000u, w->k / 2);
		pthread_exit(NULL); /* while the others still run */
	}
	w->sum = run_k((unsigned)w->index * 100000u, w->k);
	return NULL;
}

static int mode_thread_exit(int k)
{
	unsigned total = 0;

	for (int t = 0; t < 4; t++) {
		g_workers[t] = (struct worker){.index = t, .k = k, .early = t == 1};
		if (pthread_create(&g_workers[t].th, NULL, worker_main, &g_workers[t]))
			return 1;
	}
	total = run_k(7u, k);
	for (int t = 0; t < 4; t++) {
		pthread_join(g_workers[t].th, NULL);
		printf("thread %d sum=%u\n", t, g_workers[t].sum);
	}
	printf("leader sum=%u\n", total);
	return 0;
}

static int g_leader_done;

static void *leader_exit_worker(void *arg)
{
	struct worker *w = arg;
	int last;

	w->sum = run_k((unsigned)w->index * 100000u, w->k);
	pthread_mutex_lock(&g_lock);
	/* the leader's line comes first: wait for it */
	while (!g_leader_done)
		pthread_cond_wait(&g_cond, &g_lock);
	last = --g_live == 0;
	pthread_cond_broadcast(&g_cond);
	pthread_mutex_unlock(&g_lock);
	if (last) {
		/* the leader is long gone (a zombie); report in a fixed order */
		for (int t = 0; t < 2; t++)
			printf("thread %d sum=%u\n", t, g_workers[t].sum);
		fflush(stdout);
		exit(5);
	}
	return NULL;
}

static int mode_leader_exit(int k)
{
	g_live = 2;
	for (int t = 0; t < 2; t++) {
		g_workers[t] = (struct worker){.index = t, .k = k};
		if (pthread_create(&g_workers[t].th, NULL, leader_exit_worker, &g_workers[t]))
			return 1;
	}
	printf("leader sum=%u\n", run_k(3u, 1));
	fflush(stdout);
	pthread_mutex_lock(&g_lock);
	g_leader_done = 1;
	pthread_cond_broadcast(&g_cond);
	pthread_mutex_unlock(&g_lock);
	pthread_exit(NULL);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "fork";
	int k = argc > 2 ? atoi(argv[2]) : 100;
	pid_t pid;

	alarm(30);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(mode, "fork")) {
		unsigned before = run_k(0, k);

		fflush(stdout);
		pid = fork();
		if (pid < 0)
			return 1;
		if (pid == 0) {
			printf("child sum=%u\n", run_k(500, k));
			return 3;
		}
		if (wait_child(pid, "child"))
			return 1;
		printf("parent sum=%u+%u\n", before, run_k(1000, k));
		return 0;
	}
	if (!strcmp(mode, "vfork") || !strcmp(mode, "vfork-exec")) {
		int do_exec = !strcmp(mode, "vfork-exec");
		static volatile unsigned child_sum;

		fflush(stdout);
		pid = vfork();
		if (pid < 0)
			return 1;
		if (pid == 0) {
			if (do_exec) {
				execl("/bin/true", "true", (char *)NULL);
				_exit(126);
			}
			child_sum = run_k(500, k); /* the parent's memory: it is suspended */
			_exit(4);
		}
		if (wait_child(pid, "vfork child"))
			return 1;
		if (!do_exec)
			printf("vfork child sum=%u\n", child_sum);
		printf("parent sum=%u\n", run_k(1000, k));
		return 0;
	}
	if (!strcmp(mode, "exec")) {
		char kbuf[16];

		printf("before exec sum=%u\n", run_k(0, k));
		fflush(stdout);
		snprintf(kbuf, sizeof(kbuf), "%d", k);
		execl("/proc/self/exe", argv[0], "exec-child", kbuf, (char *)NULL);
		perror("exec");
		return 1;
	}
	if (!strcmp(mode, "exec-child")) {
		printf("after exec sum=%u\n", run_k(2000, k));
		return 6;
	}
	if (!strcmp(mode, "clone"))
		return mode_clone(k, 1);
	if (!strcmp(mode, "clone-vm"))
		return mode_clone(k, 0);
	if (!strcmp(mode, "thread-exit"))
		return mode_thread_exit(k);
	if (!strcmp(mode, "leader-exit"))
		return mode_leader_exit(k);
	fprintf(stderr, "core_fork: unknown mode '%s'\n", mode);
	return 2;
}
