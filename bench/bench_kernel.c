// SPDX-License-Identifier: MIT
/*
 * The kernel's uprobe tracer, driven through tracefs, as the benchmark's reference:
 * events defined in uprobe_events (p:/r: lines at file offsets, one line per write),
 * enabled in a private trace instance filtered to the target's pid (threads followed
 * with event-fork), hits checked twice: the events that reached the ring buffer
 * (entries + overrun, which is what a pid-filtered count of a libc probe can rely on)
 * and, for probes on bench_target (which nothing else runs), uprobe_profile's count.
 * Everything defined here is removed at exit, also on SIGINT/SIGTERM.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define TRACEFS "/sys/kernel/tracing"

static char group[32], rgroup[32], inst[128];
static char default_kb[32]; /* a new instance's buffer_size_kb: the kernel's default */
static bool defined[BENCH_MAX_W], inst_made;
static char defined_name[BENCH_MAX_W][64]; /* the event defined for workload i */
static long reg_defined; /* registration events r0.. still defined */

static int write_str(const char *path, const char *s, int flags)
{
	int fd = open(path, O_WRONLY | flags);
	ssize_t len = (ssize_t)strlen(s);
	int err = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, s, (size_t)len) != len)
		err = -errno;
	close(fd);
	return err;
}

static int event_line(const char *line)
{
	return write_str(TRACEFS "/uprobe_events", line, O_APPEND);
}

static int inst_write(const char *rel, const char *s, int flags)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", inst, rel);
	return write_str(path, s, flags);
}

/* uprobe_profile's hit count for event name (the event column may carry the group) */
static long profile_hits(const char *name)
{
	FILE *f = fopen(TRACEFS "/uprobe_profile", "r");
	char line[1024], file[768], ev[128];
	long hits = -1, h;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%767s %127s %ld", file, ev, &h) == 3) {
			const char *slash = strrchr(ev, '/');

			if (!strcmp(slash ? slash + 1 : ev, name))
				hits = h;
		}
	if (f)
		fclose(f);
	return hits;
}

/* events written to the instance's ring buffers since it was cleared */
static long ring_events(void)
{
	char dir[192], path[512], line[128];
	struct dirent *de;
	long total = 0, v;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/per_cpu", inst);
	d = opendir(dir);
	if (!d)
		return -1;
	while ((de = readdir(d))) {
		FILE *f;

		if (strncmp(de->d_name, "cpu", 3))
			continue;
		snprintf(path, sizeof(path), "%s/%s/stats", dir, de->d_name);
		f = fopen(path, "r");
		while (f && fgets(line, sizeof(line), f))
			if (sscanf(line, "entries: %ld", &v) == 1 ||
			    sscanf(line, "overrun: %ld", &v) == 1)
				total += v;
		if (f)
			fclose(f);
	}
	closedir(d);
	return total;
}

static void event_name(char *buf, size_t len, const char *key)
{
	snprintf(buf, len, "%s_%s", group, key);
}

const char *bench_kernel_setup(struct bench *b)
{
	static char reason[256];
	char line[1024], name[64];
	int err;

	if (geteuid() != 0)
		return "not root (the kernel's uprobe tracer needs root)";
	if (access(TRACEFS "/uprobe_events", W_OK))
		mount("nodev", TRACEFS, "tracefs", 0, NULL);
	if (access(TRACEFS "/uprobe_events", W_OK))
		return "no tracefs uprobe_events (CONFIG_UPROBE_EVENTS, tracefs)";
	snprintf(group, sizeof(group), "ub%d", (int)getpid());
	snprintf(rgroup, sizeof(rgroup), "ubr%d", (int)getpid());
	snprintf(inst, sizeof(inst), TRACEFS "/instances/%s", group);
	if (mkdir(inst, 0755)) {
		snprintf(reason, sizeof(reason), "cannot make a trace instance: %s",
			 strerror(errno));
		return reason;
	}
	inst_made = true;
	{
		char path[256];
		FILE *f;

		snprintf(path, sizeof(path), "%s/buffer_size_kb", inst);
		f = fopen(path, "r");
		if (!f || !fgets(default_kb, sizeof(default_kb), f))
			snprintf(default_kb, sizeof(default_kb), "1410");
		default_kb[strcspn(default_kb, " \n")] = 0;
		if (f)
			fclose(f);
	}
	inst_write("buffer_size_kb", "8192", O_TRUNC);
	inst_write("options/event-fork", "1", O_TRUNC);
	for (int i = 0; i < b->nw; i++) {
		struct bench_workload *w = &b->w[i];
		const char *file = w->kind == BK_MALLOC ? b->libc : b->target;

		if (w->kind == BK_FLOOR)
			continue;
		event_name(name, sizeof(name), w->key);
		snprintf(line, sizeof(line), "%c:%s/%s %s:0x%" PRIx64 "%s\n",
			 w->kind == BK_RET ? 'r' : 'p', group, name, file, w->offset,
			 w->kind == BK_ARGS ? " di=%di si=%si dx=%dx cx=%cx r8=%r8 r9=%r9" : "");
		err = event_line(line);
		if (err) {
			snprintf(reason, sizeof(reason), "uprobe_events refused '%.*s': %s",
				 (int)strcspn(line, "\n"), line, strerror(-err));
			bench_kernel_cleanup();
			return reason;
		}
		defined[i] = true;
		snprintf(defined_name[i], sizeof(defined_name[i]), "%s", name);
	}
	return NULL;
}

double bench_kernel_run(struct bench *b, int wi, long n)
{
	struct bench_workload *w = &b->w[wi];
	char name[64], rel[192], pidbuf[32];
	long prof0, prof1, ring0, ring1;
	int go, status;
	pid_t pid;

	event_name(name, sizeof(name), w->key);
	snprintf(rel, sizeof(rel), "events/%s/%s/enable", group, name);
	if (inst_write("trace", "", O_TRUNC))
		bench_die("cannot clear %s/trace", inst);
	pid = bench_child_start(b, w->mode, n, &go);
	snprintf(pidbuf, sizeof(pidbuf), "%d\n", (int)pid);
	if (inst_write("set_event_pid", pidbuf, O_TRUNC))
		bench_die("cannot write %s/set_event_pid", inst);
	prof0 = profile_hits(name);
	ring0 = ring_events();
	if (inst_write(rel, "1", O_TRUNC))
		bench_die("cannot enable %s in %s", name, inst);
	bench_child_go(go);
	status = bench_child_wait(pid);
	inst_write(rel, "0", O_TRUNC);
	prof1 = profile_hits(name);
	ring1 = ring_events();
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		bench_die("kernel tracer on (%s): the target ended with status 0x%x", w->key,
			  status);
	if (ring1 - ring0 != n)
		bench_die("kernel tracer on (%s) %s: %ld events in the ring buffer, expected %ld",
			  w->key, w->label, ring1 - ring0, n);
	if (w->kind != BK_MALLOC && prof1 - prof0 != n)
		bench_die("kernel tracer on (%s) %s: uprobe_profile counted %ld hits, "
			  "expected %ld",
			  w->key, w->label, prof1 - prof0, n);
	if (w->kind == BK_MALLOC && prof1 - prof0 < n)
		bench_die("kernel tracer on (f): uprobe_profile counted %ld < %ld",
			  prof1 - prof0, n);
	return bench_read_loop_ns(b);
}

static int read_byte(pid_t pid, uint64_t addr, uint8_t *byte)
{
	char path[64];
	int fd;
	ssize_t r;

	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -errno;
	r = pread(fd, byte, 1, (off_t)addr);
	close(fd);
	return r == 1 ? 0 : -EIO;
}

static void remove_reg_events(void)
{
	char line[512];

	if (!reg_defined)
		return;
	snprintf(line, sizeof(line), "%s/events/%s/enable", inst, rgroup);
	write_str(line, "0", O_TRUNC);
	for (long i = 0; i < reg_defined; i++) {
		snprintf(line, sizeof(line), "-:%s/r%ld\n", rgroup, i);
		event_line(line);
	}
	reg_defined = 0;
}

void bench_kernel_reg(struct bench *b, pid_t pid, const uint64_t *sites, long n, double *ins,
		      double *rem)
{
	char line[1024], rel[128];
	uint8_t byte;
	double t0, t1, t2;

	snprintf(rel, sizeof(rel), "events/%s/enable", rgroup);
	t0 = bench_now();
	for (long i = 0; i < n; i++) {
		int err;

		snprintf(line, sizeof(line), "p:%s/r%ld %s:0x%" PRIx64 "\n", rgroup, i, b->target,
			 sites[i] - b->text_delta);
		err = event_line(line);
		if (err)
			bench_die("uprobe_events refused '%.*s': %s", (int)strcspn(line, "\n"),
				  line, strerror(-err));
		reg_defined = i + 1;
	}
	if (inst_write(rel, "1", O_TRUNC))
		bench_die("cannot enable the group %s", rgroup);
	t1 = bench_now();
	for (long i = 0; i < n; i += n > 1 ? n - 1 : 1)
		if (read_byte(pid, sites[i], &byte) || byte != 0xcc)
			bench_die("kernel: no int3 at 0x%" PRIx64 " after enabling", sites[i]);
	t2 = bench_now();
	remove_reg_events();
	*rem = bench_now() - t2;
	*ins = t1 - t0;
	for (long i = 0; i < n; i += n > 1 ? n - 1 : 1)
		if (read_byte(pid, sites[i], &byte) || byte == 0xcc)
			bench_die("kernel: int3 left at 0x%" PRIx64 " after removal", sites[i]);
}

void bench_kernel_cleanup(void)
{
	char line[sizeof(group) + sizeof(defined_name[0]) + 8];

	if (!group[0])
		return;
	if (inst_made) {
		for (int i = 0; i < BENCH_MAX_W; i++)
			if (defined[i]) {
				char rel[192];

				snprintf(rel, sizeof(rel), "%s/events/%s/enable", inst, group);
				write_str(rel, "0", O_TRUNC);
				break;
			}
	}
	remove_reg_events();
	if (inst_made && rmdir(inst) == 0)
		inst_made = false;
	for (int i = 0; i < BENCH_MAX_W; i++)
		if (defined[i]) {
			/* by the name it was given (a workload's key, not its index) */
			snprintf(line, sizeof(line), "-:%s/%.63s\n", group, defined_name[i]);
			if (event_line(line) == 0)
				defined[i] = false;
		}
}

/*
 * The kernel's uprobe tracer as a user runs it to a file: the event enabled, a reader
 * copying the instance's trace_pipe (its text lines) to a file while the program runs,
 * the per-CPU buffer at kb KiB (0: the kernel's default, as a new instance has it).
 * What the reader did not get (overwritten while it fell behind) is lost.
 */
double bench_kernel_pipe_run(struct bench *b, int wi, long n, long kb, uint64_t *lost)
{
	struct bench_workload *w = &b->w[wi];
	char name[64], rel[192], pidbuf[32], kbuf[32], path[256], out[64], buf[1 << 16];
	long lines = 0;
	int go, status, fd, ofd, done = 0;
	pid_t pid;

	event_name(name, sizeof(name), w->key);
	snprintf(rel, sizeof(rel), "events/%s/%s/enable", group, name);
	snprintf(kbuf, sizeof(kbuf), "%ld", kb);
	if (inst_write("buffer_size_kb", kb ? kbuf : default_kb, O_TRUNC))
		bench_die("cannot set %s/buffer_size_kb to %s", inst, kb ? kbuf : default_kb);
	if (inst_write("trace", "", O_TRUNC))
		bench_die("cannot clear %s/trace", inst);
	snprintf(path, sizeof(path), "%s/trace_pipe", inst);
	fd = open(path, O_RDONLY | O_NONBLOCK);
	if (fd < 0)
		bench_die("cannot open %s: %s", path, strerror(errno));
	snprintf(out, sizeof(out), "/tmp/uprobe-bench-kpipe.%d", (int)getpid());
	ofd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (ofd < 0)
		bench_die("cannot create %s: %s", out, strerror(errno));
	pid = bench_child_start(b, w->mode, n, &go);
	snprintf(pidbuf, sizeof(pidbuf), "%d\n", (int)pid);
	if (inst_write("set_event_pid", pidbuf, O_TRUNC))
		bench_die("cannot write %s/set_event_pid", inst);
	if (inst_write(rel, "1", O_TRUNC))
		bench_die("cannot enable %s in %s", name, inst);
	bench_child_go(go);
	/* read while it runs; once it has ended, until the pipe is dry */
	for (;;) {
		struct pollfd pfd = { fd, POLLIN, 0 };
		ssize_t r = read(fd, buf, sizeof(buf));

		if (r > 0) {
			for (ssize_t i = 0; i < r; i++)
				lines += buf[i] == '\n';
			if (write(ofd, buf, (size_t)r) != r)
				bench_die("cannot write %s", out);
			continue;
		}
		if (r < 0 && errno != EAGAIN && errno != EINTR)
			bench_die("read %s: %s", path, strerror(errno));
		if (done)
			break;
		if (waitpid(pid, &status, WNOHANG) == pid) {
			inst_write(rel, "0", O_TRUNC);
			done = 1;
			continue;
		}
		poll(&pfd, 1, 10);
	}
	close(fd);
	close(ofd);
	unlink(out);
	inst_write("buffer_size_kb", "8192", O_TRUNC);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		bench_die("kernel tracer to a file on (%s): the target ended with status 0x%x",
			  w->key, status);
	if (lines > n)
		bench_die("kernel tracer to a file on (%s) %s: %ld lines of %ld calls", w->key,
			  w->label, lines, n);
	*lost = (uint64_t)(n - lines);
	return bench_read_loop_ns(b);
}
