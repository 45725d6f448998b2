#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks `uprobe list FILE` against readelf and the file itself.

- the set of (address, name) equals readelf's defined FUNC/IFUNC symbols (.symtab and
  .dynsym; version suffixes dropped), and lines come sorted by address;
- every name given with --expect is listed;
- the file offset column is right: the size bytes at that offset of the file are the
  bytes objdump shows for the function (checked for each --expect'ed name);
- a PATTERN filters by glob, and a pattern that matches nothing exits 1.

Exit status: 0 pass, 1 fail, 77 skip (FILE or binutils missing).
"""
import argparse
import fnmatch
import os
import re
import shutil
import subprocess
import sys

SKIP = 77


def run(cmd, want_status=0):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True)
    if want_status is not None and proc.returncode != want_status:
        sys.exit("FAIL: %s exited %d (expected %d): %s" %
                 (" ".join(cmd), proc.returncode, want_status, proc.stderr.strip()))
    return proc


def parse_list(text):
    rows = []
    for line in text.splitlines():
        f = line.split()
        if len(f) != 4 or not f[0].startswith("0x"):
            sys.exit("FAIL: malformed uprobe list line: %r" % line)
        offset = None if f[1] == "-" else int(f[1], 16)
        rows.append((int(f[0], 16), offset, int(f[2]), f[3]))
    return rows


def readelf_funcs(path):
    out = run(["readelf", "-sW", path]).stdout
    funcs = set()
    for line in out.splitlines():
        f = line.split()
        # Num: Value Size Type Bind Vis Ndx Name
        if len(f) < 8 or not f[0].endswith(":") or f[3] not in ("FUNC", "IFUNC"):
            continue
        if f[6] == "UND":
            continue
        name = re.sub(r"@.*$", "", f[7])
        if name:
            funcs.add((int(f[1], 16), name))
    return funcs


def objdump_bytes(path, vaddr, size):
    out = run(["objdump", "-d", "-w", "-z", "--start-address=0x%x" % vaddr,
               "--stop-address=0x%x" % (vaddr + size), path]).stdout
    raw = []
    for line in out.splitlines():
        m = re.match(r"^\s*[0-9a-f]+:\t((?:[0-9a-f]{2} )*[0-9a-f]{2})", line)
        if m:
            raw.extend(int(b, 16) for b in m.group(1).split())
    return bytes(raw)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--uprobe", required=True)
    ap.add_argument("--expect", action="append", default=[],
                    help="a function that must be listed (its offset is checked too)")
    ap.add_argument("file")
    args = ap.parse_args()

    if not os.path.exists(args.file):
        print("SKIP: %s does not exist" % args.file)
        return SKIP
    for tool in ("readelf", "objdump"):
        if not shutil.which(tool):
            print("SKIP: %s not found (Debian package binutils)" % tool)
            return SKIP

    failed = []
    rows = parse_list(run([args.uprobe, "list", args.file]).stdout)
    listed = {(v, n) for v, _, _, n in rows}
    theirs = readelf_funcs(args.file)
    print("%s: uprobe lists %d functions, readelf %d" % (args.file, len(listed), len(theirs)))
    if listed != theirs:
        failed.append("symbol sets differ: only uprobe %s; only readelf %s" %
                      (sorted(listed - theirs)[:10], sorted(theirs - listed)[:10]))
    if [r[0] for r in rows] != sorted(r[0] for r in rows):
        failed.append("lines are not sorted by address")

    by_name = {}
    for v, off, size, name in rows:
        by_name.setdefault(name, (v, off, size))
    with open(args.file, "rb") as f:
        image = f.read()
    for name in args.expect:
        if name not in by_name:
            failed.append("%s is not listed" % name)
            continue
        v, off, size = by_name[name]
        if off is None or size == 0:
            failed.append("%s has no file offset or no size" % name)
            continue
        mine = image[off:off + size]
        ref = objdump_bytes(args.file, v, size)
        print("  %s: 0x%x offset 0x%x size %d: %s" % (name, v, off, size,
                                                       "bytes match" if mine == ref else
                                                       "BYTES DIFFER"))
        if mine != ref:
            failed.append("%s: bytes at offset 0x%x are %s, objdump shows %s" %
                          (name, off, mine[:16].hex(), ref[:16].hex()))

        # the pattern filter: an exact name, and a glob around it
        glob = name[:2] + "*"
        got = {n for _, _, _, n in parse_list(run([args.uprobe, "list", args.file,
                                                     glob]).stdout)}
        want = {n for _, n in theirs if fnmatch.fnmatchcase(n, glob)}
        if got != want:
            failed.append("pattern %r: got %s, want %s" % (glob, sorted(got)[:10],
                                                            sorted(want)[:10]))

    proc = run([args.uprobe, "list", args.file, "no-such-function-*"], want_status=None)
    if proc.returncode != 1 or proc.stdout or "no function matches" not in proc.stderr:
        failed.append("a pattern matching nothing gave exit %d, stdout %r, stderr %r" %
                      (proc.returncode, proc.stdout[:80], proc.stderr.strip()))

    for why in failed:
        print("FAIL: " + why)
    print("FAIL" if failed else "PASS")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
