#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""sym.unwind_table: the rows src/sym/unwind.c builds equal readelf's CFA and rbp
columns (readelf --debug-dump=frames-interp) at every row readelf prints, for each
FILE. The time each build took is printed, not judged: a test is no stopwatch (the
machine is shared, sanitizer builds are several times slower); make bench's "libc's
unwind table" row measures it.

usage: unwind_oracle.py UNWIND_DUMP FILE..."""
import bisect
import re
import subprocess
import sys


def ours(dump, path):
    out = subprocess.run([dump, "-r", path], capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    m = re.match(r"rows (\d+) bytes (\d+) ms ([\d.]+)", lines[0])
    rows = []
    for ln in lines[1:]:
        a, kind, cfa_off, rbp, rbp_off = ln.split()
        rows.append((int(a, 16), kind, int(cfa_off), rbp, int(rbp_off)))
    return rows, int(m.group(1)), int(m.group(2)), float(m.group(3))


def readelf_rows(path):
    out = subprocess.run(["readelf", "--debug-dump=frames-interp", path],
                         capture_output=True, text=True).stdout  # 1 for a debuglink
    cols = None
    in_fde = False
    for ln in out.splitlines():
        if " FDE " in ln:
            in_fde = True
            cols = None
            continue
        if " CIE " in ln:
            in_fde = False
            continue
        if not in_fde:
            continue
        f = ln.split()
        if f and f[0] == "LOC":
            cols = f
            continue
        if cols and f and re.fullmatch(r"[0-9a-f]{8,16}", f[0]):
            # "r9 (r9)" style cells: register names in parentheses are one cell
            cells = re.findall(r"\S+ \([^)]*\)|\S+", ln)
            yield int(f[0], 16), dict(zip(cols[1:], cells[1:]))


def expect(cell):
    cfa, rbp, ra = cell.get("CFA"), cell.get("rbp", "u"), cell.get("ra", "u")
    if ra == "u":
        return ("end",)
    m = re.fullmatch(r"(rsp|rbp)\+(-?\d+)", cfa or "")
    if cfa == "exp":
        return ("exp",)
    if not m or ra != "c-8":
        return ("unknown",)
    if rbp == "u":
        r = ("same", 0)
    elif re.fullmatch(r"c[+-]\d+", rbp):
        r = ("cfa", int(rbp[1:]))
    else:
        r = ("undef", 0)
    return (m.group(1), int(m.group(2))) + r


def main():
    dump, files = sys.argv[1], sys.argv[2:]
    bad = 0
    for path in files:
        rows, n, size, ms = ours(dump, path)
        pcs = [r[0] for r in rows]
        checked = 0
        for loc, cell in readelf_rows(path):
            i = bisect.bisect_right(pcs, loc) - 1
            if i < 0:
                print(f"{path}: {loc:#x}: no row"); bad += 1; continue
            _, kind, cfa_off, rbp, rbp_off = rows[i]
            got = (kind, cfa_off, rbp, rbp_off)
            want = expect(cell)
            checked += 1
            if want[0] == "exp":
                ok = kind in ("plt", "deref", "unknown", "signal")
            elif want[0] in ("end", "unknown"):
                ok = kind in (want[0], "signal")
            else:
                ok = got == want or kind == "signal"
            if not ok:
                bad += 1
                if bad < 20:
                    print(f"{path}: {loc:#x}: ours {got}, readelf {cell} -> {want}")
        print(f"{path}: {checked} readelf rows checked, table {n} rows {size} bytes "
              f"built in {ms} ms")
        if not checked:
            print(f"{path}: nothing checked"); bad += 1
    print("unwind_oracle:", "FAIL" if bad else "ok", bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
