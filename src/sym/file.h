/* SPDX-License-Identifier: MIT */
/*
 * Opening the files a traced process names, for reading: the paths of its mappings, the
 * debug files and libraries they lead to, and the files a user names.  The tracer is
 * often root and the process someone else's, so what sits at such a path is the
 * process's choice: a FIFO (an open for reading waits for a writer, for ever), a device
 * (its driver's open runs: a tty, a watchdog), a symlink to either, another file than
 * the one mapped.  Every such open goes through up_file_open(), which:
 *
 *   1. for a mapping, opens /proc/PID/map_files/START-END when it can (root, or
 *      CAP_CHECKPOINT_RESTORE): the inode mapped itself, whatever is at its path now,
 *      deleted or not (its inode is not held to the number maps gives: an overlayfs
 *      may show another);
 *   2. else opens the path with O_PATH (no driver's open, no FIFO wait), O_NOFOLLOW for
 *      a mapping's path (/proc/PID/maps names the file as the kernel resolved it, so a
 *      symlink there was put there afterwards) but not for a name a user gave
 *      (/lib64/ld-linux-x86-64.so.2, a .build-id link: symlinks by design);
 *   3. refuses anything that is not a regular file, or over UP_FILE_MAX_SIZE, or, for a
 *      mapping, not the inode /proc/PID/maps gives;
 *   4. only then opens it for reading, through /proc/self/fd/N (the same inode: no race
 *      with a rename), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, and clears
 *      O_NONBLOCK.
 *
 * A refusal returns a negative errno (-EISDIR a directory, -ENXIO another non-regular
 * file, -ELOOP a symlink where a mapping's path was, -ESTALE another inode than the one
 * mapped, -EFBIG too big) and up_file_strerror() says which file kind and why.  Nothing
 * here prints.  Prefix: up_file_.
 */
#ifndef UPROBE_SYM_FILE_H
#define UPROBE_SYM_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where a process maps the file: all that is needed to reach the very inode mapped. */
struct up_file_map {
	int pid;	     /* the process that maps it (0: none) */
	uint64_t start, end; /* the mapping, as /proc/PID/maps gives it */
	uint64_t ino;	     /* its file's inode number there (0: unknown) */
};

/* Larger files are refused: what is read from them (a debuglink's CRC reads the whole
   file, libelf a section's whole size) stays bounded. */
#define UP_FILE_MAX_SIZE (8ull << 30)

/*
 * Opens path for reading as above; map (may be NULL) says where a process maps it.
 * follow: the last component of path may be a symlink (a name a user or a debug
 * directory gave); with a map it is never followed.  Returns the descriptor (blocking,
 * close-on-exec) or a negative errno.
 */
int up_file_open(const char *path, const struct up_file_map *map, bool follow);

/*
 * What err, returned by the last up_file_open() of this thread, means: for a refusal,
 * the reason ("not a regular file (FIFO)"), else strerror's text.
 */
const char *up_file_strerror(int err);

/*
 * The whole of a small file of the kernel's (/proc, tracefs), NUL-terminated, its
 * length in *outlen (may be NULL); the caller frees *out.  0, -EFBIG past max bytes
 * (what a process can make long, such as its maps: the caller reads it another way),
 * or -errno.  Not for a path a process names (up_file_open).
 */
int up_file_read_whole(const char *path, size_t max, char **out, size_t *outlen);

#endif
