// SPDX-License-Identifier: MIT
/*
 * A library named as bpftrace names it ("libc", "libssl"): the file the process maps,
 * else the one the dynamic linker's search path gives.  `uprobe run` resolves its
 * attach points' targets here, and the session its rename watch's libc
 * (trace/session.h up_trace_watch_comm).  Reads /proc and directories only.
 */
#include <dirent.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "sym/sym.h"

/* "libc" as bpftrace finds it: a file NAME.so* or NAME-*.so the process maps. */
static bool lib_in_maps(pid_t pid, const char *name, char *out, size_t size)
{
	char path[64], line[PATH_MAX + 128];
	size_t nl = strlen(name);
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		char *p = strchr(line, '/'), *base;

		if (!p)
			continue;
		p[strcspn(p, "\n")] = '\0';
		base = strrchr(p, '/') + 1;
		if (!strncmp(base, name, nl) && (base[nl] == '.' || base[nl] == '-') &&
		    strstr(base, ".so")) {
			snprintf(out, size, "%s", p);
			found = true;
		}
	}
	fclose(f);
	return found;
}

/* The linker's search path: NAME.so.N (the highest-priority directory first). */
static bool lib_in_path(const char *name, char *out, size_t size)
{
	static const char *const dirs[] = {
		"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64",
		"/lib", "/usr/lib", "/usr/local/lib", NULL,
	};
	size_t nl = strlen(name);
	const char *ld = getenv("LD_LIBRARY_PATH");

	for (int pass = 0; pass < 2; pass++) {
		char ldbuf[PATH_MAX];
		const char *list[64];
		unsigned nlist = 0;

		if (!pass && ld && *ld) {
			snprintf(ldbuf, sizeof(ldbuf), "%s", ld);
			for (char *sv, *t = strtok_r(ldbuf, ":", &sv); t && nlist < 63;
			     t = strtok_r(NULL, ":", &sv))
				list[nlist++] = t;
		} else if (pass) {
			for (int i = 0; dirs[i]; i++)
				list[nlist++] = dirs[i];
		}
		for (unsigned i = 0; i < nlist; i++) {
			DIR *d = opendir(list[i]);
			struct dirent *e;
			char best[NAME_MAX + 1] = "";

			if (!d)
				continue;
			while ((e = readdir(d))) {
				if (strncmp(e->d_name, name, nl) || strncmp(e->d_name + nl, ".so", 3))
					continue;
				/* the runtime's name (libc.so.6) before the link-time one (libc.so) */
				if (!best[0] || (strlen(e->d_name) > strlen(best) && !strcmp(best + nl, ".so")) ||
				    (strcmp(e->d_name + nl, ".so") && strlen(e->d_name) < strlen(best)))
					snprintf(best, sizeof(best), "%s", e->d_name);
			}
			closedir(d);
			if (best[0]) {
				snprintf(out, size, "%s/%s", list[i], best);
				return true;
			}
		}
	}
	return false;
}

bool up_sym_find_lib(const char *name, pid_t pid, char *out, size_t size)
{
	if (pid > 0 && lib_in_maps(pid, name, out, size))
		return true;
	return lib_in_path(name, out, size);
}
