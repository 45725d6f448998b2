// SPDX-License-Identifier: MIT
/*
 * Replay driver for the fuzz targets built without libFuzzer: runs
 * LLVMFuzzerTestOneInput once per input.  Inputs are the files named on the command
 * line (a directory stands for every regular file in it, in name order), or stdin when
 * there are none.  Exit status 0 when every input ran; a target that finds a bug
 * aborts, as it does under the fuzzer.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

/* Reads all of f into a malloc'ed buffer of exactly its size (NULL for 0 bytes). */
static int slurp(FILE *f, uint8_t **out, size_t *out_len)
{
	size_t cap = 0, len = 0;
	uint8_t *buf = NULL, *exact;

	for (;;) {
		size_t n;

		if (len == cap) {
			uint8_t *nb;

			cap = cap ? cap * 2 : 4096;
			nb = realloc(buf, cap);
			if (!nb) {
				free(buf);
				return -ENOMEM;
			}
			buf = nb;
		}
		n = fread(buf + len, 1, cap - len, f);
		len += n;
		if (n == 0)
			break;
	}
	if (ferror(f)) {
		free(buf);
		return -EIO;
	}
	/* an exactly-sized copy, so that a read past the end is caught by ASan */
	exact = len ? malloc(len) : NULL;
	if (len && !exact) {
		free(buf);
		return -ENOMEM;
	}
	if (len)
		memcpy(exact, buf, len);
	free(buf);
	*out = exact;
	*out_len = len;
	return 0;
}

static int run_stream(FILE *f, const char *name)
{
	uint8_t *data = NULL;
	size_t len = 0;

	if (slurp(f, &data, &len)) {
		fprintf(stderr, "replay: %s: read failed\n", name);
		return 1;
	}
	LLVMFuzzerTestOneInput(data, len);
	free(data);
	return 0;
}

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	int rc;

	if (!f) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return 1;
	}
	rc = run_stream(f, path);
	fclose(f);
	return rc;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_dir(const char *path, unsigned *count)
{
	DIR *d = opendir(path);
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;

	if (!d) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return 1;
	}
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (n == cap) {
			char **nn = realloc(names, (cap = cap ? cap * 2 : 64) * sizeof(*names));

			if (!nn) {
				rc = 1;
				break;
			}
			names = nn;
		}
		if (asprintf(&names[n], "%s/%s", path, de->d_name) < 0) {
			rc = 1;
			break;
		}
		n++;
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), by_name);
	for (size_t i = 0; i < n; i++) {
		struct stat st;

		if (!rc && !stat(names[i], &st) && S_ISREG(st.st_mode)) {
			rc |= run_file(names[i]);
			(*count)++;
		}
		free(names[i]);
	}
	free(names);
	return rc;
}

int main(int argc, char **argv)
{
	unsigned count = 0;
	int rc = 0;

	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	if (argc < 2) {
		rc = run_stream(stdin, "<stdin>");
		count = 1;
	}
	for (int i = 1; i < argc; i++) {
		struct stat st;

		if (!stat(argv[i], &st) && S_ISDIR(st.st_mode)) {
			rc |= run_dir(argv[i], &count);
		} else {
			rc |= run_file(argv[i]);
			count++;
		}
	}
	fprintf(stderr, "replay: %u input%s%s\n", count, count == 1 ? "" : "s",
		rc ? ", some could not be read" : " ok");
	return rc;
}
