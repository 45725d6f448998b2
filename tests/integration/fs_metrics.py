#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""usage: fs_metrics.py UPROBE METRICS_PROG

`uprobe mount --listen` (tools/uprobe/mount.c, src/fs/fs.c's wake_fd): an event and
its hist trigger written into the mount from a shell, two rounds of 3,000 known calls
(tests/targets/metrics_prog.c), then GET /metrics from inside the mount's command: the
hit counter, the histogram's _count and _sum (kept for it though the trigger has no
vals) equal what the sequence gives, and promtool accepts the exposition.
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile

UPROBE, PROG = sys.argv[1], sys.argv[2]
N = 3000

SCRIPT = r'''
D=$1; P=$2; PORT=$3
echo "p:app/sized $P:sized v=%di:u64" > $D/uprobe_events || exit 3
echo 'hist:keys=v.log2' > $D/events/app/sized/trigger || exit 4
echo 1 > $D/events/app/sized/enable || exit 5
printf 'go\ngo\n' | $P 3000 > /dev/null || exit 6
python3 -c 'import sys, urllib.request
sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' \
    http://127.0.0.1:$PORT/metrics
'''


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


if not os.path.exists("/dev/fuse") or not shutil.which("fusermount3"):
    print("SKIP: no /dev/fuse or fusermount3 here (Debian package fuse3)")
    sys.exit(77)
s = socket.socket()
s.bind(("127.0.0.1", 0))
port = s.getsockname()[1]
s.close()
top = tempfile.mkdtemp(prefix="fs_metrics.")
try:
    m = os.path.join(top, "m")
    os.mkdir(m)
    script = os.path.join(top, "run.sh")
    with open(script, "w") as f:
        f.write(SCRIPT)
    p = subprocess.run([UPROBE, "mount", "--listen", "127.0.0.1:%d" % port, m, "--", "sh",
                        script, m, PROG, str(port)], capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        fail("status %d; stdout %s; stderr %s" % (p.returncode, p.stdout, p.stderr))
    if "metrics at http://127.0.0.1:%d/metrics" % port not in p.stderr:
        fail("no 'metrics at' line: " + p.stderr)
    vals = {}
    for line in p.stdout.splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            vals[k] = int(v)
    total = 2 * sum((i * 37) % 5000 for i in range(N))
    hits = [v for k, v in vals.items() if k.startswith("uprobe_probe_hits_total{")]
    if hits != [2 * N] or vals.get("uprobe_hist_app_sized_count") != 2 * N or \
            vals.get("uprobe_hist_app_sized_sum") != total:
        fail("hits %r, _count %r, _sum %r; expected %d, %d, %d\n%s" % (
            hits, vals.get("uprobe_hist_app_sized_count"), vals.get("uprobe_hist_app_sized_sum"),
            2 * N, 2 * N, total, p.stdout))
    tool = shutil.which("promtool")
    if tool:
        c = subprocess.run([tool, "check", "metrics"], input=p.stdout, capture_output=True,
                           text=True)
        if c.returncode or c.stdout.strip() or c.stderr.strip():
            fail("promtool: " + c.stdout + c.stderr)
    print("ok: mount --listen: hits %d, _count %d, _sum %d%s" % (
        2 * N, 2 * N, total, ", promtool clean" if tool else " (promtool missing: not linted)"))
finally:
    shutil.rmtree(top, ignore_errors=True)
