// SPDX-License-Identifier: MIT
/* Prometheus's exposition: escaping and stacks as label values (prom.h). */
#include "trace/prom.h"

#include <string.h>

void up_prom_escape(FILE *out, const char *s, size_t n, bool label)
{
	for (size_t i = 0; s && i < n && s[i]; i++) {
		char c = s[i];

		if (c == '\\')
			fputs("\\\\", out);
		else if (c == '\n')
			fputs("\\n", out);
		else if (c == '"' && label)
			fputs("\\\"", out);
		else
			fputc(c, out);
	}
}

void up_prom_frames(FILE *out, const char *frames)
{
	const char *fr[64], *s = frames ? frames : "";
	size_t len[64];
	unsigned nf = 0;

	while (*s && nf < 64) {
		size_t l = strcspn(s, "\n");
		const char *a = s;

		s += l + (s[l] == '\n');
		while (l && *a == ' ')
			a++, l--;
		if (l) {
			fr[nf] = a;
			len[nf++] = l;
		}
	}
	while (nf--) {
		up_prom_escape(out, fr[nf], len[nf], true);
		if (nf)
			fputc(';', out);
	}
}
