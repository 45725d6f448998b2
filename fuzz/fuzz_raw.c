// SPDX-License-Identifier: MIT
/*
 * Fuzz target: the raw trace reader (src/trace/raw.c, `uprobe report`) and the record
 * memory lookup it shares with the live drain (src/agent/rec.c).
 *
 * The input is a whole file.  Whatever it holds, the reader must return 0 (with an END
 * block or without: a file cut short) or a negative errno, with a message when it is
 * -EINVAL, and write only whole lines; text and JSON must agree on how many events the
 * file holds and how many records and blocks were skipped as unreadable.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/raw.h"

#define CHECK(cond)                                                                    \
	do {                                                                           \
		if (!(cond)) {                                                         \
			fprintf(stderr, "fuzz_raw: check failed: %s (%s:%d)\n", #cond,  \
				__FILE__, __LINE__);                                   \
			abort();                                                       \
		}                                                                      \
	} while (0)

static int report(const uint8_t *data, size_t size, bool json, struct up_raw_stats *st)
{
	struct up_raw_report_opts o = { .json = json, .header = !json };
	char err[512], *out = NULL;
	size_t outlen = 0;
	FILE *in = fmemopen((void *)data, size, "r"), *o_f = open_memstream(&out, &outlen);
	int rc;

	CHECK(in && o_f);
	err[0] = '\0';
	rc = up_raw_report(in, o_f, &o, st, err, sizeof(err));
	fclose(in);
	fclose(o_f);
	CHECK(rc == 0 || rc == -EINVAL || rc == -ENOMEM);
	if (rc == -EINVAL)
		CHECK(err[0] && memchr(err, '\0', sizeof(err)));
	CHECK(!outlen || out[outlen - 1] == '\n');
	free(out);
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct up_raw_stats text, json;
	int rt, rj;

	if (!size) /* fmemopen refuses an empty buffer */
		return 0;
	rt = report(data, size, false, &text);
	rj = report(data, size, true, &json);
	CHECK(rt == rj);
	CHECK(text.records == json.records && text.ended == json.ended);
	/* what cannot be read is skipped, the same in both, each kind saying where */
	CHECK(text.skipped == json.skipped);
	for (int k = 0; k < UP_RAW_SKIP_KINDS; k++) {
		CHECK(text.skip[k].n == json.skip[k].n);
		CHECK(!text.skip[k].n || !strncmp(text.skip[k].first, "at byte ", 8));
	}
	return 0;
}
