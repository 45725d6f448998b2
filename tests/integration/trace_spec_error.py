#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""trace.errors.*: one malformed spec through `uprobe trace -e SPEC -- sh -c 'echo RAN'`.

usage: trace_spec_error.py UPROBE SPEC TOKEN MESSAGE-REGEX

Passes when uprobe exits 2, stderr repeats SPEC on a line of its own, the next line is
a caret line ("^~~~") whose caret stands under TOKEN in SPEC (TOKEN "$END": just past
the end of SPEC; "-": no caret line, the error has no place), the message matches
MESSAGE-REGEX, and the command never ran (no "RAN").
"""
import re
import subprocess
import sys


def main():
    uprobe, spec, token, regex = sys.argv[1:5]
    cmd = [uprobe, "trace", "-e", spec, "--", "sh", "-c", "echo RAN"]
    print("$", " ".join(repr(c) if " " in c or not c else c for c in cmd))
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=15)
    print(r.stdout + r.stderr + "[exit %d]" % r.returncode)
    fails = []
    if r.returncode != 2:
        fails.append("exit status %d, expected 2" % r.returncode)
    if "RAN" in r.stdout or "RAN" in r.stderr:
        fails.append("the command ran although the spec is bad")
    lines = r.stderr.splitlines()
    if spec.strip() not in lines and spec not in lines:
        fails.append("the spec is not repeated on a line of its own")
    elif token != "-":
        i = lines.index(spec if spec in lines else spec.strip())
        caret = lines[i + 1] if i + 1 < len(lines) else ""
        m = re.fullmatch(r"( *)\^(~*)", caret)
        if not m:
            fails.append("no caret line under the spec: %r" % caret)
        else:
            col = len(m.group(1))
            want = len(spec) if token == "$END" else spec.find(token)
            if token != "$END" and want < 0:
                sys.exit("bad test: %r is not in the spec" % token)
            if col != want:
                fails.append("caret at column %d, expected %d (under %r)" % (col, want, token))
            if token not in ("$END",) and 1 + len(m.group(2)) != len(token):
                fails.append("caret line %r does not span %r" % (caret, token))
    if not re.search(regex, r.stderr):
        fails.append("message does not match /%s/" % regex)
    for f in fails:
        print("FAIL:", f)
    if fails:
        sys.exit(1)
    print("PASS")


if __name__ == "__main__":
    main()
