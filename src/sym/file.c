// SPDX-License-Identifier: MIT
/*
 * Opening the files a traced process names (see file.h): a mapping through
 * /proc/PID/map_files, else the path with O_PATH; a regular file, checked on the
 * descriptor before anything opens it for reading.  It never reads, and never opens a
 * FIFO, a device or a socket other than with O_PATH.
 */
#include "sym/file.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The last refusal of this thread, for up_file_strerror(). */
static __thread struct {
	int err;
	char why[160];
} refusal;

static int refuse(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int refuse(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(refusal.why, sizeof(refusal.why), fmt, ap);
	va_end(ap);
	refusal.err = err;
	return err;
}

const char *up_file_strerror(int err)
{
	if (err && err == refusal.err)
		return refusal.why;
	return strerror(err < 0 ? -err : err);
}

static const char *kind_of(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFIFO:
		return "FIFO";
	case S_IFCHR:
		return "character device";
	case S_IFBLK:
		return "block device";
	case S_IFSOCK:
		return "socket";
	case S_IFLNK:
		return "symbolic link";
	case S_IFDIR:
		return "directory";
	default:
		return "unknown kind";
	}
}

/* Is st a file we may open for reading (as the map says, if any)?  0 or a refusal. */
static int check(const struct stat *st, const struct up_file_map *map)
{
	if (S_ISDIR(st->st_mode))
		return -EISDIR; /* strerror says it */
	if (S_ISLNK(st->st_mode) && map)
		return refuse(-ELOOP, "a symbolic link where the process maps a file");
	if (!S_ISREG(st->st_mode))
		return refuse(-ENXIO, "not a regular file (%s)", kind_of(st->st_mode));
	if ((uint64_t)st->st_size > UP_FILE_MAX_SIZE)
		return refuse(-EFBIG, "larger than %llu GiB (%" PRIu64 " bytes): not read",
			      UP_FILE_MAX_SIZE >> 30, (uint64_t)st->st_size);
	/* the inode alone: btrfs subvolumes give stat another st_dev than maps shows */
	if (map && map->ino && (uint64_t)st->st_ino != map->ino)
		return refuse(-ESTALE,
			      "not the file the process maps (inode %" PRIu64 ", mapped %" PRIu64
			      "): deleted or replaced since",
			      (uint64_t)st->st_ino, map->ino);
	return 0;
}

/* Opens what the O_PATH descriptor pfd (stat st) is, for reading. */
static int reopen(int pfd, const struct stat *st, const char *path, bool follow)
{
	const int flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
	struct stat now;
	char self[64];
	int fd, fl;

	snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
	fd = open(self, flags);
	/* no /proc: by the path again, and the same inode or nothing */
	if (fd < 0 && errno == ENOENT)
		fd = open(path, flags | (follow ? 0 : O_NOFOLLOW));
	if (fd < 0)
		return -errno;
	if (fstat(fd, &now) || !S_ISREG(now.st_mode) || now.st_dev != st->st_dev ||
	    now.st_ino != st->st_ino) {
		close(fd);
		return refuse(-ESTALE, "replaced while it was opened");
	}
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
		fl = -errno;
		close(fd);
		return fl;
	}
	return fd;
}

/* Opens path (O_PATH first) if check() takes it; -ENOENT etc. as open(2) when absent. */
static int open_checked(const char *path, const struct up_file_map *map, bool follow)
{
	struct stat st;
	int pfd, rc;

	pfd = open(path, O_PATH | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));
	if (pfd < 0)
		return -errno;
	if (fstat(pfd, &st) < 0) {
		rc = -errno;
		close(pfd);
		return rc;
	}
	rc = check(&st, map);
	if (!rc)
		rc = reopen(pfd, &st, path, follow);
	close(pfd);
	return rc;
}

int up_file_open(const char *path, const struct up_file_map *map, bool follow)
{
	char mf[96];
	int rc;

	refusal.err = 0;
	if (map && map->pid > 0 && map->end > map->start) {
		/* the magic link leads to the inode mapped, whatever its name: followed, and
		   not held to maps' inode number (an overlayfs may show the upper one) */
		struct up_file_map any = *map;

		any.ino = 0;
		snprintf(mf, sizeof(mf), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, map->pid,
			 map->start, map->end);
		rc = open_checked(mf, &any, true);
		/* not allowed (no CAP_CHECKPOINT_RESTORE), or unmapped since: by the path */
		if (rc != -EPERM && rc != -EACCES && rc != -ENOENT)
			return rc;
		refusal.err = 0;
	}
	return open_checked(path, map, follow && !map);
}

int up_file_read_whole(const char *path, size_t max, char **out, size_t *outlen)
{
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap);
	int fd;

	if (!buf)
		return -ENOMEM;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int err = -errno;

		free(buf);
		return err;
	}
	for (;;) {
		ssize_t n;

		if (cap - len < 2048) {
			char *nb = realloc(buf, cap * 2);

			if (!nb) {
				free(buf);
				close(fd);
				return -ENOMEM;
			}
			buf = nb;
			cap *= 2;
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n < 0) {
			int err = -errno;

			if (errno == EINTR)
				continue;
			free(buf);
			close(fd);
			return err;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > max) {
			free(buf);
			close(fd);
			return -EFBIG;
		}
	}
	close(fd);
	buf[len] = '\0';
	*out = buf;
	if (outlen)
		*outlen = len;
	return 0;
}
