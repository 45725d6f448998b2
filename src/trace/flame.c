// SPDX-License-Identifier: MIT
/*
 * Flame graphs (flame.h): a tree of frames by name, each node its count (the stacks
 * through it) and its own (the stacks that end there).  The SVG is drawn here, laid
 * out as flamegraph.pl lays its out (a frame's width its share of all the stacks, its
 * children left to right by name), with a small script for the zoom.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "trace/flame.h"

struct node {
	char *name;
	uint64_t count, self;
	struct node **kids;
	unsigned nkids, cap;
};

struct up_flame {
	struct node root;
	unsigned depth; /* the deepest stack's frames */
};

struct up_flame *up_flame_new(void)
{
	return calloc(1, sizeof(struct up_flame));
}

static void node_free(struct node *n)
{
	for (unsigned i = 0; i < n->nkids; i++) {
		node_free(n->kids[i]);
		free(n->kids[i]);
	}
	free(n->kids);
	free(n->name);
}

void up_flame_free(struct up_flame *f)
{
	if (!f)
		return;
	node_free(&f->root);
	free(f);
}

void up_flame_frame_name(const char *frame, size_t len, char *buf, size_t size)
{
	size_t n = len;

	if (!size)
		return;
	if (len && frame[0] != '[') { /* "func+0x12 [file]": the function */
		const char *plus = memchr(frame, '+', len);

		if (plus)
			n = (size_t)(plus - frame);
	}
	if (n >= size)
		n = size - 1;
	for (size_t i = 0; i < n; i++)
		buf[i] = frame[i] == ';' ? ':' : frame[i] == '\n' ? ' ' : frame[i];
	buf[n] = '\0';
}

static struct node *child(struct node *n, const char *name)
{
	struct node *k;

	for (unsigned i = 0; i < n->nkids; i++) /* kept in name order */
		if (!strcmp(n->kids[i]->name, name))
			return n->kids[i];
	if (n->nkids == n->cap) {
		unsigned cap = n->cap ? 2 * n->cap : 4;
		struct node **v = realloc(n->kids, cap * sizeof(*v));

		if (!v)
			return NULL;
		n->kids = v;
		n->cap = cap;
	}
	k = calloc(1, sizeof(*k));
	if (!k || !(k->name = strdup(name))) {
		free(k);
		return NULL;
	}
	{
		unsigned at = n->nkids;

		while (at > 0 && strcmp(n->kids[at - 1]->name, name) > 0) {
			n->kids[at] = n->kids[at - 1];
			at--;
		}
		n->kids[at] = k;
		n->nkids++;
	}
	return k;
}

int up_flame_add(struct up_flame *f, const char *frames, uint64_t count)
{
	const char *line[256];
	size_t len[256];
	unsigned n = 0;
	struct node *at = &f->root;

	for (const char *s = frames; *s && n < 256;) {
		const char *nl = strchr(s, '\n');
		size_t l = nl ? (size_t)(nl - s) : strlen(s);

		if (l) {
			line[n] = s;
			len[n++] = l;
		}
		s += l + (nl != NULL);
	}
	if (!n)
		return 0;
	at->count += count;
	for (unsigned i = n; i-- > 0;) { /* outermost first */
		char name[512];

		up_flame_frame_name(line[i], len[i], name, sizeof(name));
		at = child(at, name);
		if (!at)
			return -ENOMEM;
		at->count += count;
	}
	at->self += count;
	if (n > f->depth)
		f->depth = n;
	return 0;
}

/* ---- folded --------------------------------------------------------------------------- */

struct path {
	char *buf;
	size_t len, cap;
};

static int folded(const struct node *n, struct path *p, FILE *out)
{
	size_t was = p->len;
	size_t need = p->len + strlen(n->name) + 2;
	int rc = 0;

	if (need > p->cap) {
		char *b = realloc(p->buf, need * 2);

		if (!b)
			return -ENOMEM;
		p->buf = b;
		p->cap = need * 2;
	}
	p->len += (size_t)sprintf(p->buf + p->len, "%s%s", was ? ";" : "", n->name);
	if (n->self && fprintf(out, "%s %" PRIu64 "\n", p->buf, n->self) < 0)
		rc = -EIO;
	for (unsigned i = 0; !rc && i < n->nkids; i++)
		rc = folded(n->kids[i], p, out);
	p->len = was;
	p->buf[was] = '\0';
	return rc;
}

int up_flame_folded(const struct up_flame *f, FILE *out)
{
	struct path p = { 0 };
	int rc = 0;

	for (unsigned i = 0; !rc && i < f->root.nkids; i++)
		rc = folded(f->root.kids[i], &p, out);
	free(p.buf);
	return rc ? rc : ferror(out) ? -EIO : 0;
}

/* ---- SVG ------------------------------------------------------------------------------ */

#define SVG_W 1200
#define ROW 17
#define TOP 42 /* the title, the reset line */
#define BOTTOM 20
#define PAD 10

static void xml(FILE *out, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '<': fputs("&lt;", out); break;
		case '>': fputs("&gt;", out); break;
		case '&': fputs("&amp;", out); break;
		case '"': fputs("&quot;", out); break;
		default:
			if ((unsigned char)*s >= 0x20)
				fputc(*s, out);
		}
	}
}

/* flamegraph.pl's "hot" palette, by a hash of the name (the same name, the same color) */
static void color(const char *name, char *buf, size_t size)
{
	uint32_t h = 2166136261u;

	for (const char *s = name; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	snprintf(buf, size, "rgb(%u,%u,%u)", 205 + h % 50, (h >> 8) % 230, (h >> 16) % 55);
}

static void svg_node(const struct node *n, double x, unsigned depth, double scale, unsigned height,
		     uint64_t total, FILE *out)
{
	double w = (double)n->count * scale;
	double y = height - BOTTOM - (double)(depth + 1) * ROW;
	char fill[32];
	int chars = (int)((w - 6) / 7);

	if (w < 0.1)
		return;
	color(n->name, fill, sizeof(fill));
	fputs("<g class=\"f\"><title>", out);
	xml(out, n->name);
	fprintf(out, " (%" PRIu64 " samples, %.2f%%)</title>", n->count,
		100.0 * (double)n->count / (double)total);
	fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"%s\" "
		     "rx=\"2\" ry=\"2\" data-d=\"%u\"/>", PAD + x, y, w, ROW - 1, fill, depth);
	fputs("<text x=\"", out);
	fprintf(out, "%.1f\" y=\"%.1f\">", PAD + x + 3, y + ROW - 5);
	if (chars >= 3) {
		size_t len = strlen(n->name);

		if (len <= (size_t)chars) {
			xml(out, n->name);
		} else {
			char cut[512];

			snprintf(cut, sizeof(cut), "%.*s..", chars - 2, n->name);
			xml(out, cut);
		}
	}
	fputs("</text></g>\n", out);
	for (unsigned i = 0; i < n->nkids; i++) {
		svg_node(n->kids[i], x, depth + 1, scale, height, total, out);
		x += (double)n->kids[i]->count * scale;
	}
}

/* The zoom: a frame clicked fills the width, its stacks above it scaled with it, the
   frames below it (its callers) kept full and faded, the rest hidden. */
static const char svg_script[] =
	"<script type=\"text/ecmascript\"><![CDATA[\n"
	"var W = %d, PAD = %d, frames = [];\n"
	"function label(g, w) {\n"
	"  var t = g.querySelector('text'), n = g.getAttribute('data-n'), c = Math.floor((w - 6) / 7);\n"
	"  t.textContent = c < 3 ? '' : n.length <= c ? n : n.substring(0, c - 2) + '..';\n"
	"}\n"
	"function zoom(g) {\n"
	"  var x = +g.getAttribute('data-x'), w = +g.getAttribute('data-w'), d = +g.getAttribute('data-d');\n"
	"  frames.forEach(function (f) {\n"
	"    var fx = +f.getAttribute('data-x'), fw = +f.getAttribute('data-w'), fd = +f.getAttribute('data-d');\n"
	"    var r = f.querySelector('rect'), t = f.querySelector('text'), nx, nw;\n"
	"    if (fd >= d && fx >= x - 1e-6 && fx + fw <= x + w + 1e-6) {\n"
	"      nx = (fx - x) * W / w; nw = fw * W / w; f.style.display = ''; f.style.opacity = 1;\n"
	"    } else if (fd < d && fx <= x + 1e-6 && fx + fw >= x + w - 1e-6) {\n"
	"      nx = 0; nw = W; f.style.display = ''; f.style.opacity = 0.5;\n"
	"    } else { f.style.display = 'none'; return; }\n"
	"    r.setAttribute('x', PAD + nx); r.setAttribute('width', nw);\n"
	"    t.setAttribute('x', PAD + nx + 3); label(f, nw);\n"
	"  });\n"
	"  document.getElementById('reset').style.opacity = d > 0 || w < W ? 1 : 0;\n"
	"  document.documentElement.setAttribute('data-zoom', g.getAttribute('data-n'));\n"
	"}\n"
	"function reset() {\n"
	"  frames.forEach(function (f) {\n"
	"    var r = f.querySelector('rect'), x = +f.getAttribute('data-x'), w = +f.getAttribute('data-w');\n"
	"    f.style.display = ''; f.style.opacity = 1;\n"
	"    r.setAttribute('x', PAD + x); r.setAttribute('width', w);\n"
	"    f.querySelector('text').setAttribute('x', PAD + x + 3); label(f, w);\n"
	"  });\n"
	"  document.getElementById('reset').style.opacity = 0;\n"
	"  document.documentElement.removeAttribute('data-zoom');\n"
	"}\n"
	"function init() {\n"
	"  frames = Array.prototype.slice.call(document.querySelectorAll('g.f'));\n"
	"  frames.forEach(function (f) {\n"
	"    var r = f.querySelector('rect');\n"
	"    f.setAttribute('data-x', +r.getAttribute('x') - PAD); f.setAttribute('data-w', r.getAttribute('width'));\n"
	"    f.setAttribute('data-d', r.getAttribute('data-d'));\n"
	"    var n = f.querySelector('title').textContent; f.setAttribute('data-n', n.substring(0, n.lastIndexOf(' (')));\n"
	"    f.addEventListener('click', function () { zoom(f); });\n"
	"  });\n"
	"  document.getElementById('reset').addEventListener('click', reset);\n"
	"  var m = /zoom=([^&]*)/.exec(location.hash);\n"
	"  if (m) { var name = decodeURIComponent(m[1]);\n"
	"    for (var i = 0; i < frames.length; i++) if (frames[i].getAttribute('data-n') === name) { zoom(frames[i]); break; } }\n"
	"  document.documentElement.setAttribute('data-frames', frames.length);\n"
	"}\n"
	"]]></script>\n";

int up_flame_svg(const struct up_flame *f, const char *title, FILE *out)
{
	unsigned height = TOP + (f->depth + 1) * ROW + BOTTOM;
	uint64_t total = f->root.count;
	double scale = total ? (double)SVG_W / (double)total : 0, x = 0;

	fprintf(out, "<?xml version=\"1.0\" standalone=\"no\"?>\n"
		     "<svg version=\"1.1\" width=\"%d\" height=\"%u\" onload=\"init()\" "
		     "viewBox=\"0 0 %d %u\" xmlns=\"http://www.w3.org/2000/svg\">\n",
		SVG_W + 2 * PAD, height, SVG_W + 2 * PAD, height);
	fputs("<style>text { font-family: Verdana, sans-serif; font-size: 12px; fill: #000; }\n"
	      "g.f { cursor: pointer; } g.f:hover rect { stroke: #000; stroke-width: 0.5; }\n"
	      "#title { font-size: 17px; } #reset { cursor: pointer; opacity: 0; }</style>\n",
	      out);
	fprintf(out, svg_script, SVG_W, PAD);
	fprintf(out, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%u\" fill=\"#f8f8f0\"/>\n",
		SVG_W + 2 * PAD, height);
	fprintf(out, "<text id=\"title\" x=\"%d\" y=\"24\" text-anchor=\"middle\">", SVG_W / 2 + PAD);
	xml(out, title && *title ? title : "Flame Graph");
	fprintf(out, "</text>\n<text id=\"reset\" x=\"%d\" y=\"24\">Reset Zoom</text>\n", PAD);
	fprintf(out, "<text x=\"%d\" y=\"%u\">%" PRIu64 " samples</text>\n", PAD, height - 5, total);
	for (unsigned i = 0; i < f->root.nkids; i++) {
		svg_node(f->root.kids[i], x, 0, scale, height, total, out);
		x += (double)f->root.kids[i]->count * scale;
	}
	fputs("</svg>\n", out);
	return ferror(out) ? -EIO : 0;
}
