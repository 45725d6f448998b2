#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""usage: metrics.py UPROBE METRICS_PROG

`uprobe trace --listen` (tools/uprobe/listen.c, src/trace/metrics.c) against real
parts: rounds of known calls (tests/targets/metrics_prog.c), scraped between rounds.
  exposition  promtool check metrics is clean; the log2 histogram of sized(v) has the
              buckets, _sum and _count the test computes from the sequence itself;
              the hit counter equals _count; a string key's values are escaped labels
  openmetrics Accept: application/openmetrics-text gives that format, ending "# EOF"
  hostile     40 slowloris connections, garbage, a POST, an oversized header, a
              wrong path: each refused or left to time out, while the next round is
              traced in full and a scrape still answers
  prometheus  Debian's prometheus scrapes 127.0.0.1: up == 1 and _count == the hits
              at the last scrape (skipped, with the reason, where it is missing)
  end         the program's output and status are as unprobed
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

UPROBE, PROG = sys.argv[1], sys.argv[2]
N = 3000
SPEC = "p:app/sized %s:sized v=%%di:u64" % PROG
SPEC2 = "p:app/named %s:named name=+0(%%di):string" % PROG
TRIG = "app/sized:hist:keys=v.log2"
TRIG2 = "app/named:hist:keys=name"


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def expect_round(p, r):
    line = p.stdout.readline()
    if line != "done %d\n" % r:
        fail("round %d: the program printed %r" % (r, line))


def scrape(port, accept=None, timeout=10):
    req = urllib.request.Request("http://127.0.0.1:%d/metrics" % port)
    if accept:
        req.add_header("Accept", accept)
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.headers.get("Content-Type"), r.read().decode()


def samples(text):
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        name, val = line.rsplit(" ", 1)
        out[name] = float(val)
    return out


def expected(rounds):
    """log2 buckets as the agent keys them: k with 2^(k-1) < v <= 2^k (0: v <= 1)."""
    counts, total = {}, 0
    for _ in range(rounds):
        for i in range(N):
            v = (i * 37) % 5000
            k = 0 if v <= 1 else (v - 1).bit_length()
            counts[k] = counts.get(k, 0) + 1
            total += v
    return counts, total


def check_histogram(text, rounds):
    s = samples(text)
    counts, total = expected(rounds)
    fam = "uprobe_hist_app_sized"
    cum = 0
    for k in range(0, max(counts) + 1):
        cum += counts.get(k, 0)
        key = '%s_bucket{le="%d"}' % (fam, 1 << k)
        if s.get(key) != cum:
            fail("%s = %r, expected %d\n%s" % (key, s.get(key), cum, text))
    if s.get('%s_bucket{le="+Inf"}' % fam) != N * rounds:
        fail("+Inf bucket %r, expected %d" % (s.get('%s_bucket{le="+Inf"}' % fam), N * rounds))
    if s.get(fam + "_count") != N * rounds or s.get(fam + "_sum") != total:
        fail("_count %r _sum %r, expected %d %d" % (s.get(fam + "_count"), s.get(fam + "_sum"),
                                                   N * rounds, total))
    hits = [v for k, v in s.items() if k.startswith("uprobe_probe_hits_total{") and
            'event="sized"' in k]
    if hits != [N * rounds]:
        fail("uprobe_probe_hits_total for sized: %r, expected [%d]" % (hits, N * rounds))
    # the string key: three names, escaped as label values
    per = N * rounds // 3
    for lab in ['name="alpha"', 'name="q\\"uote"', 'name="back\\\\slash"']:
        key = "uprobe_hist_app_named_hits_total{%s}" % lab
        if s.get(key) != per:
            fail("%s = %r, expected %d\n%s" % (key, s.get(key), per, text))


def promtool(text):
    tool = shutil.which("promtool")
    if not tool:
        print("note: promtool missing (Debian package prometheus): lint skipped")
        return
    p = subprocess.run([tool, "check", "metrics"], input=text, capture_output=True, text=True)
    if p.returncode != 0 or p.stdout.strip() or p.stderr.strip():
        fail("promtool check metrics: %s%s" % (p.stdout, p.stderr))


def hostile(port):
    """Clients that misbehave; returns the sockets left open (slowloris)."""
    held = []
    for _ in range(40):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-a: ")  # never finished
        held.append(s)

    def exchange(data):
        # the server's connection timeout is 10 s: a request it cannot parse may be
        # left to it, and must be closed by then
        s = socket.create_connection(("127.0.0.1", port), timeout=15)
        got = b""
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
            while True:
                b = s.recv(65536)
                if not b:
                    break
                got += b
        except (ConnectionResetError, BrokenPipeError, OSError) as e:
            if isinstance(e, TimeoutError):
                raise
        finally:
            s.close()
        return got

    for data, want in [
        (b"\x00\xff garbage \r\n\r\n", (b"", b"HTTP/1.1 400")),
        (b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
         (b"HTTP/1.1 405",)),
        (b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-big: " + b"a" * 100000 + b"\r\n\r\n",
         (b"", b"HTTP/1.1 431", b"HTTP/1.1 413", b"HTTP/1.1 400")),
        (b"GET /../../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n", (b"HTTP/1.1 404",)),
        (b"DELETE /metrics HTTP/1.1\r\nHost: x\r\n\r\n", (b"HTTP/1.1 405",)),
    ]:
        got = exchange(data)
        if not any(got.startswith(w) for w in want if w) and not (b"" in want and not got):
            fail("a misbehaving request %r... got %r" % (data[:30], got[:80]))
    return held


def prometheus(port, rounds, p):
    exe = shutil.which("prometheus")
    if not exe:
        print("note: prometheus missing (Debian package prometheus): server test skipped")
        return
    d = tempfile.mkdtemp(prefix="uprobe-prom.")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    web = s.getsockname()[1]
    s.close()
    with open(os.path.join(d, "prometheus.yml"), "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                "scrape_configs:\n  - job_name: uprobe\n    static_configs:\n"
                "      - targets: ['127.0.0.1:%d']\n" % port)
    srv = subprocess.Popen([exe, "--config.file=" + os.path.join(d, "prometheus.yml"),
                            "--storage.tsdb.path=" + os.path.join(d, "data"),
                            "--web.listen-address=127.0.0.1:%d" % web],
                           stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "log"), "w"))

    def query(q):
        u = "http://127.0.0.1:%d/api/v1/query?query=%s" % (web, urllib.request.quote(q))
        with urllib.request.urlopen(u, timeout=5) as r:
            res = json.loads(r.read())["data"]["result"]
        return [float(x["value"][1]) for x in res]

    try:
        deadline = time.time() + 60
        up = count = None
        while time.time() < deadline:
            try:
                up = query('up{job="uprobe"}')
                count = query("uprobe_hist_app_sized_count")
                if up == [1.0] and count == [float(N * rounds)]:
                    break
            except OSError:
                pass
            time.sleep(0.5)
        if up != [1.0] or count != [float(N * rounds)]:
            fail("prometheus: up %r, uprobe_hist_app_sized_count %r, expected [1] and [%d]; "
                 "its log:\n%s" % (up, count, N * rounds, open(os.path.join(d, "log")).read()[-2000:]))
        q = query("histogram_quantile(0.5, uprobe_hist_app_sized_bucket)")
        print("prometheus: up 1, _count %d, histogram_quantile(0.5) %r" % (N * rounds, q))
        if len(q) != 1 or not 2048 <= q[0] <= 4096:
            fail("histogram_quantile(0.5, ...) = %r: the median of 0..4999 is in (2048, 4096]" % q)
    finally:
        srv.terminate()
        srv.wait(timeout=30)
        shutil.rmtree(d, ignore_errors=True)


def main():
    if not os.path.exists("/lib/x86_64-linux-gnu/libc.so.6"):
        print("SKIP: not a Debian x86-64 system")
        sys.exit(77)
    tables = tempfile.NamedTemporaryFile(prefix="uprobe-metrics.", suffix=".txt")
    p = subprocess.Popen([UPROBE, "trace", "-e", SPEC, "-e", SPEC2, "-t", TRIG, "-t", TRIG2,
                          "-o", tables.name, "--listen", "127.0.0.1:0", "--", PROG, str(N)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, bufsize=1)
    try:
        line = p.stderr.readline()
        m = re.search(r"metrics at http://127\.0\.0\.1:(\d+)/metrics", line)
        if not m:
            fail("no 'metrics at' line on stderr: %r" % line)
        port = int(m.group(1))
        p.stdin.write("go\n")
        expect_round(p, 1)
        ctype, text = scrape(port)
        if not ctype.startswith("text/plain; version=0.0.4"):
            fail("Content-Type %r" % ctype)
        promtool(text)
        check_histogram(text, 1)
        ctype, om = scrape(port, "application/openmetrics-text; version=1.0.0,text/plain;q=0.5")
        if not ctype.startswith("application/openmetrics-text") or not om.endswith("# EOF\n"):
            fail("OpenMetrics: %r, ends %r" % (ctype, om[-20:]))
        if "# TYPE uprobe_probe_hits counter" not in om or 'le="4096.0"' not in om:
            fail("OpenMetrics: counter family or float le missing:\n" + om)
        held = hostile(port)
        p.stdin.write("go\n")
        expect_round(p, 2)
        _, text = scrape(port)
        check_histogram(text, 2)
        print("hostile: %d slowloris connections held, 5 bad requests refused; round 2 "
              "traced in full and scraped" % len(held))
        for s in held:
            s.close()
        prometheus(port, 2, p)
        out, err = p.communicate("", timeout=60)
        if out != "bye\n" or p.returncode != 0:
            fail("the program's end: %r, status %d; stderr %s" % (out, p.returncode, err))
        t = open(tables.name).read()
        # the tables at the end: as without --listen (the sum kept for _sum not shown)
        if "Hits: %d" % (2 * N) not in t or "vals=hitcount:sort" not in t or "v: " not in t:
            fail("the tables at the end:\n" + t)
    finally:
        if p.poll() is None:
            p.kill()
    print("ok: metrics (exposition, OpenMetrics, hostile clients, prometheus)")


main()
