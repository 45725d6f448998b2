#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""usage: run_metrics.py UPROBE METRICS_PROG

`uprobe run --listen` (tools/uprobe/run.c's render_run, src/bt/maps.c's
bt_map_print_prom): a bpftrace program's maps scraped while it runs, after a round of
3,000 known calls (tests/targets/metrics_prog.c) -- a hist() (in the process), an
lhist(), a stats() and a count() keyed by strings (on the trap path):
  - every bucket cumulative, with bpftrace's [lo, hi) bounds as integer le = hi - 1,
    _sum and _count as the sequence gives them; the summary's _sum/_count; the counter
    per string key, escaped;
  - promtool check metrics is clean; OpenMetrics on request ends "# EOF";
  - the maps printed at the end are unchanged by the scrapes.
"""
import re
import shutil
import subprocess
import sys
import urllib.request

UPROBE, PROG = sys.argv[1], sys.argv[2]
N = 3000


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def scrape(port, om=False):
    req = urllib.request.Request("http://127.0.0.1:%d/metrics" % port)
    if om:
        req.add_header("Accept", "application/openmetrics-text; version=1.0.0")
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.read().decode()


vals = [(i * 37) % 5000 for i in range(N)]
PROGRAM = ("uprobe:%s:sized { @sizes = hist(arg0); } "
           "uprobe:%s:sized { @lin = lhist(arg0, 0, 5000, 1000); } "
           "uprobe:%s:sized { @st = stats(arg0); } "
           "uprobe:%s:named { @names[str(arg0)] = count(); }") % ((PROG,) * 4)
p = subprocess.Popen([UPROBE, "run", "--listen", "127.0.0.1:0", "-e", PROGRAM, "-c",
                      "%s %d" % (PROG, N)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, text=True, bufsize=1)
try:
    m = re.search(r"metrics at http://127\.0\.0\.1:(\d+)/metrics", p.stderr.readline())
    if not m:
        fail("no 'metrics at' line")
    port = int(m.group(1))
    if p.stdout.readline() != "Attaching 4 probes...\n":
        fail("no 'Attaching 4 probes...'")
    p.stdin.write("go\n")
    if p.stdout.readline() != "done 1\n":
        fail("the program's round did not end")
    text = scrape(port)
    s = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            s[k] = int(v)
    # hist(): (..., 0) le -1, [0] le 0, [1] le 1, [2^k, 2^(k+1)) le 2^(k+1) - 1
    top = max(vals).bit_length()
    for k in range(0, top + 1):
        le = 0 if k == 0 else (1 << k) - 1
        want = sum(1 for v in vals if v <= le)
        key = 'uprobe_bt_sizes_bucket{le="%d"}' % le
        if s.get(key) != want:
            fail("%s = %r, expected %d\n%s" % (key, s.get(key), want, text))
    for le in (999, 1999, 2999, 3999, 4999):
        want = sum(1 for v in vals if v <= le)
        key = 'uprobe_bt_lin_bucket{le="%d"}' % le
        if s.get(key) != want:
            fail("%s = %r, expected %d\n%s" % (key, s.get(key), want, text))
    for fam in ("uprobe_bt_sizes", "uprobe_bt_lin"):
        if s.get(fam + '_bucket{le="+Inf"}') != N or s.get(fam + "_count") != N or \
                s.get(fam + "_sum") != sum(vals):
            fail("%s: +Inf/_count/_sum %r %r %r" % (fam, s.get(fam + '_bucket{le="+Inf"}'),
                                                   s.get(fam + "_count"), s.get(fam + "_sum")))
    if s.get("uprobe_bt_st_count") != N or s.get("uprobe_bt_st_sum") != sum(vals):
        fail("stats(): _count %r _sum %r" % (s.get("uprobe_bt_st_count"), s.get("uprobe_bt_st_sum")))
    for lab in ['"alpha"', '"q\\"uote"', '"back\\\\slash"']:
        if s.get("uprobe_bt_names_total{key=%s}" % lab) != N // 3:
            fail("@names[%s]: %r\n%s" % (lab, s.get("uprobe_bt_names_total{key=%s}" % lab), text))
    tool = shutil.which("promtool")
    if tool:
        c = subprocess.run([tool, "check", "metrics"], input=text, capture_output=True, text=True)
        if c.returncode or c.stdout.strip() or c.stderr.strip():
            fail("promtool: " + c.stdout + c.stderr)
    om = scrape(port, True)
    if not om.endswith("# EOF\n") or "# TYPE uprobe_bt_names counter" not in om:
        fail("OpenMetrics:\n" + om)
    out, err = p.communicate("", timeout=60)
    if "@names[alpha]: %d" % (N // 3) not in out or "@st: count %d" % N not in out:
        fail("the maps at the end:\n" + out + err)
    if p.returncode != 0:
        fail("status %d: %s" % (p.returncode, err))
finally:
    if p.poll() is None:
        p.kill()
print("ok: uprobe run --listen: hist, lhist, stats and a string-keyed count as the sequence "
      "gives them%s" % (", promtool clean" if shutil.which("promtool") else ""))
