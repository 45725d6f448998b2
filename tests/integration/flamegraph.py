#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""usage: flamegraph.py UPROBE UNWIND_PROG

--format folded and --flamegraph (issue 31 item 5) on tests/targets/unwind_prog.c:

  folded  `uprobe trace --format folded` (no -t: the event counts by stacktrace) prints
          one line a stack, outermost frame first, 'main;c1;c2;c3;leaf 3': the very
          stacks a stacktrace hist key counts (its frames reversed, the functions'
          names), on the fast path and with --no-fast.
  svg     `--flamegraph FILE.svg` drawn and opened in headless Chromium: the DOM its
          script leaves has a frame for every distinct node of those stacks, each named;
          opened at #zoom=c1 the script zooms into c1 (c1 and the frames it calls fill
          the width); a screenshot of that shows c1's color across c1's row, and the
          flame colors over much of the picture.  Without Chromium: skipped (77).
"""
import collections
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

UPROBE, PROG = sys.argv[1], os.path.abspath(sys.argv[2])


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run(args):
    p = subprocess.run([UPROBE, "trace"] + args + ["--", PROG, "3"], capture_output=True,
                       text=True, timeout=120)
    if p.returncode != 0:
        fail("%s exited %d\n%s" % (args, p.returncode, p.stderr[-2000:]))
    return p.stdout


EV = ["-e", "p:u/leaf %s:leaf" % PROG]

# folded ---------------------------------------------------------------------------------
hist = run(EV + ["-t", "leaf:hist:keys=stacktrace"])
want = collections.Counter()
for frames, n in re.findall(r"^\{ common_stacktrace:\n((?:         .*\n)+)\} hitcount:\s+(\d+)",
                            hist, re.M):
    names = [l.strip() for l in frames.splitlines()]
    names = [f if f.startswith("[") else f.split("+")[0] for f in names]
    want[";".join(reversed(names))] += int(n)
if not want:
    fail("no stacks in the hist:\n" + hist[-1000:])
for mode in ([], ["--no-fast"]):
    got = collections.Counter()
    for line in run(mode + ["--format", "folded"] + EV).splitlines():
        m = re.fullmatch(r"(\S.*) (\d+)", line)
        if not m:
            fail("not a folded line: %r" % line)
        got[m.group(1)] += int(m.group(2))
    if got != want:
        fail("folded %s: %s\n the hist's: %s" % (mode, sorted(got.items())[:4],
                                                 sorted(want.items())[:4]))
if not any(k.endswith("main;c1;c2;c3;leaf") for k in want):
    fail("no main;c1;c2;c3;leaf stack: %s" % list(want))
print("folded: %d stacks (%d hits) equal the stacktrace hist's, fast and --no-fast" %
      (len(want), sum(want.values())))

# svg in a browser -----------------------------------------------------------------------
chromium = shutil.which("chromium") or shutil.which("chromium-browser")
if not chromium:
    print("SKIP: no chromium (Debian's chromium package) to open the SVG in")
    sys.exit(77)
tmp = tempfile.mkdtemp(prefix="upt_flame.")
svg = os.path.join(tmp, "leaf.svg")
run(["--flamegraph", svg] + EV)
nodes = set()
for k in want:
    fr = k.split(";")
    for i in range(len(fr)):
        nodes.add(tuple(fr[:i + 1]))
height = int(re.search(r'height="(\d+)"', open(svg).read()).group(1))
base = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
        "--user-data-dir=" + os.path.join(tmp, "profile"), "--window-size=1220,%d" % height]


def browse(extra, url):
    p = subprocess.run(base + extra + [url], capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        fail("chromium %s exited %d: %s" % (extra, p.returncode, p.stderr[-1000:]))
    return p.stdout


dom = browse(["--dump-dom"], "file://" + svg)
m = re.search(r'data-frames="(\d+)"', dom)
if not m or int(m.group(1)) != len(nodes):
    fail("the page's script found %s frames, the stacks have %d nodes" %
         (m and m.group(1), len(nodes)))
texts = set(re.findall(r"<title>([^<(]+) \(", dom))
if not {"main", "c1", "c2", "c3", "leaf", "via_lib", "lib_call", "handler"} <= texts:
    fail("frames not in the page: %s" % texts)

url = "file://" + svg + "#zoom=c1"
dom = browse(["--dump-dom"], url)
if 'data-zoom="c1"' not in dom:
    fail("#zoom=c1 did not zoom")
c1 = re.search(r'<title>c1 \([^<]*</title><rect x="([\d.]+)" y="([\d.]+)" width="([\d.]+)"[^>]*'
               r'fill="rgb\((\d+), ?(\d+), ?(\d+)\)"', dom)
if not c1 or abs(float(c1.group(3)) - 1200) > 0.5:
    fail("c1 zoomed is not the whole width: %s" % (c1 and c1.groups()))
png = os.path.join(tmp, "zoom.png")
browse(["--screenshot=" + png], url)


def pixels(path):
    """(width, height, rows of (r, g, b)) of an 8-bit RGB or RGBA PNG."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail("not a PNG: " + path)
    at, idat, w = 8, b"", 0
    while at < len(data):
        n, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            if depth != 8 or ctype not in (2, 6):
                fail("PNG of depth %d, color type %d" % (depth, ctype))
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        at += 12 + n
    raw, rows, prev = zlib.decompress(idat), [], bytearray(w * bpp)
    stride = w * bpp
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(w)])
        prev = line
    return w, h, rows


w, h, rows = pixels(png)
want_rgb = tuple(int(c1.group(i)) for i in (4, 5, 6))
y = int(float(c1.group(2)) + 4)
row = rows[y] if y < h else []
# c1's row: its color from one end to the other (the name's pixels aside)
hits = sum(1 for x in range(20, 1200) if x < w and row[x] == want_rgb)
if hits < 1000:
    fail("the screenshot's c1 row (y=%d) has c1's color %s at %d of 1180 pixels" %
         (y, want_rgb, hits))
flame = sum(1 for r in rows for p in r if p[0] >= 200 and p[2] <= 60)
if flame < w * h // 10:
    fail("the screenshot has %d flame-colored pixels of %d" % (flame, w * h))
shutil.rmtree(tmp, ignore_errors=True)
print("svg: %d frames in Chromium's DOM, named; zoomed into c1 it fills the width, "
      "%d of its row's pixels in its color on the screenshot" % (len(nodes), hits))
print("PASS")
