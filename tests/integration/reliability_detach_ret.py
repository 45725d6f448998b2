#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""usage: reliability_detach_ret.py UPROBE CORE_THREADS [ROUNDS]

Return probes hijack return addresses; a detach must give every one back, also for a
thread that has just trapped in the return trampoline and whose stop is still queued.
ROUNDS times: 4 threads of tests/targets/core_threads call probed_work flat out, uprobe
attaches with a return probe on it and a probe on probed_helper, and is stopped by
SIGINT a moment later; the target must finish with the unprobed output and status."""
import re, signal, subprocess, sys, time

uprobe, prog = sys.argv[1], sys.argv[2]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 10
args = [prog, "4", "40000000"]
plain = subprocess.run(args, capture_output=True, text=True)
for r in range(rounds):
    target = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    time.sleep(0.02)
    tracer = subprocess.Popen([uprobe, "trace", "-c", "-p", str(target.pid),
                               "-e", "r:t/work %s:probed_work" % prog,
                               "-e", "p:t/helper %s:probed_helper" % prog],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            with open("/proc/%d/status" % target.pid) as f:
                if re.search(r"TracerPid:\s*%d\b" % tracer.pid, f.read()):
                    break
        except FileNotFoundError:
            break
        time.sleep(0.005)
    time.sleep(0.05 + 0.02 * (r % 5))
    tracer.send_signal(signal.SIGINT)
    tracer.wait(timeout=20)
    out, _ = target.communicate(timeout=60)
    if target.returncode != plain.returncode or out != plain.stdout:
        print("FAIL: round %d: the target ended with %d (unprobed %d)\n%s" %
              (r, target.returncode, plain.returncode, tracer.stderr.read()))
        sys.exit(1)
print("%d detaches with return probes live: the target ended as unprobed each time" % rounds)
print("PASS")
