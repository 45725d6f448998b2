#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""sym.fde: src/sym/fde.c's FDE ranges equal readelf's, file by file.

readelf --debug-dump=frames prints each FDE as "pc=START..END"; fde_dump prints ours
in the same form.  A file missing on this machine is skipped with its name; at least
one must be compared."""
import os
import re
import subprocess
import sys

FILES = ["/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib32/libc.so.6", "/usr/bin/bash",
         "/usr/bin/python3.11", "/lib64/ld-linux-x86-64.so.2"]


def readelf(path):
    # readelf exits 1 on its own warnings (a .gnu_debuglink it cannot follow)
    out = subprocess.run(["readelf", "--debug-dump=frames", path], capture_output=True,
                         text=True, check=False).stdout
    return sorted("%016x..%016x" % (int(a, 16), int(b, 16))
                  for a, b in re.findall(r"pc=([0-9a-f]+)\.\.([0-9a-f]+)", out))


def main():
    dump = sys.argv[1]
    compared = 0
    for path in FILES:
        if not os.path.exists(path):
            print(f"{path}: not on this machine, skipped")
            continue
        ours = sorted(subprocess.run([dump, path], capture_output=True, text=True,
                                     check=True).stdout.split())
        theirs = readelf(path)
        if ours != theirs:
            extra = sorted(set(ours) - set(theirs))[:5]
            missing = sorted(set(theirs) - set(ours))[:5]
            print(f"FAIL {path}: {len(ours)} FDEs, readelf {len(theirs)}; "
                  f"ours only {extra}, readelf only {missing}")
            return 1
        print(f"{path}: {len(ours)} FDEs, equal to readelf's")
        compared += 1
    if not compared:
        print("FAIL: no file to compare")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
