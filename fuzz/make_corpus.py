#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Regenerates the seed corpora in fuzz/corpus/<target>/ (checked in; run by hand).

spec: probe specs from the seeds' documentation (seeds/008) and the kernel's
      uprobetracer.rst, the forms spec.h lists, and refused ones.
insn: a control byte (see fuzz_insn.c) and one instruction, for every plan and
      reason, in 64- and 32-bit mode, near and far slots.
elf:  tiny programs built from one small C file (gcc -Os, -s, -m32, -c, -shared),
      a truncated copy, a non-x86 and a non-ELF file.  Needs gcc with -m32 support.
"""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")


def reset(name):
    d = os.path.join(CORPUS, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


SPECS_OK = [
    # seeds/008 (trace_uprobes documentation and sample session)
    "up 3906 0x400498 D 0x600960 15",
    "up 3906 0x400498 D 0x600958 8",
    "up 3906 0x400498 S 100",
    "up 3906 0x400498 A 5",
    "up 6424 0x4004d8 D 7fff6bf587d0 35",
    "up 0 0x401126 A 1",
    # Documentation/trace/uprobetracer.rst
    "p:uprobes/p_zsh_0x46420 /bin/zsh:0x46420 %ip %ax",
    "p /bin/zsh:0x46420 %ip %ax",
    "p:zfree_entry /bin/zsh:0x46420 %ip %ax",
    "r:zfree_exit /bin/zsh:0x46420 %ip %ax",
    "r /bin/bash:0x4245c0",
    "p:bash_0x4245c0 /bin/bash:0x4245c0",
    "p /bin/bash:0x4245c0 +0(%di):string $stack0 $stack1:u32",
    "p:grp/ev /bin/x:0x10(0x2040) a=@0x601040:u32 b=@+0x1000:x8",
    "p /bin/x:0x10%return(0x8)",
    "r:t/ret /lib/x86_64-linux-gnu/libc.so.6:4096 rv=$retval:s32 c=$comm",
    # symbol and absolute targets, $argN, sized registers, types (extensions)
    "p /usr/lib/libc.so.6:malloc size=%di:u64",
    "r /usr/lib/libc.so.6:malloc+0x10 ptr=$retval",
    "p ./sample:foo.cold",
    "p 0x401126 x=$arg1:s32 y=$arg7 s=$stack",
    "p 0x401126%return",
    "p:sample/foo ./sample:foo a=$arg1:s32 d=$arg4:s64 e=$arg5:u8 ret=$stack0",
    "p:sample/globals ./sample:foo p=+0(@0x404018):string s=@0x404020:string comm=$comm",
    "p:libc/getenv /lib/libc.so.6:getenv name=+0(%di):string",
    "p /bin/x:0x10 e=%eax w=%ax:x16 l=%al h=%ah r=%r8d:s32 b=%r9b",
    "p /bin/x:0x10 bf=+0(%di):b4@3/32 bf2=%si:b1@0/8 neg=-8(%sp):s64",
    'p /bin/x:0x10 im=\\123 ims=\\0x7f:string str=\\"hello" us=+0(%dx):ustring',
    "p /bin/x:0x10 deep=+0(+8(+16(+24(%di)))):u16 x=%flags o=%orig_ax ip=%ip sp=%sp",
    "p /bin/x:0x10 s8=%di:s8 s16=%di:s16 u32=%di:u32 x64=%di:x64 x32=%di:x32",
    "p C:/weird:path:0x20  # comment %bogus",
    "\tp\t/bin/x:0x10\t%di  ",
    "p /bin/x:0x10 %cs %ss %ds %es %fs %gs %r15 %bp %bx %cx %dx",
]

SPECS_BAD = [
    "",
    "   # only a comment",
    "q /bin/x:0x10",
    "up",
    "up 3906",
    "up 3906 0x400498 X 5",
    "up 3906 0x400498 A 7",
    "up -1 0x400498 S 100",
    "up 3906 0x400498 S 99999999",
    "up 3906 zz D 0x1 1",
    "p",
    "p /bin/x",
    "p /bin/x:",
    "p /bin/x:0x10 %nosuchreg",
    "p /bin/x:0x10 +0(%di):string:u8",
    "p /bin/x:0x10 %di:string",
    "p /bin/x:0x10 $stack99999999999",
    "p /bin/x:0x10 $retval",
    "p:grp/ /bin/x:0x10",
    "p:/ev /bin/x:0x10",
    "p:" + "e" * 70 + " /bin/x:0x10",
    "p /bin/x:0x10 " + "a=%di " * 130,
    "p /bin/x:0x10 " + "x" * 40 + "=%di",
    "p /bin/x:0x10 v=+0(+0(+0(+0(+0(+0(+0(+0(+0(+0(+0(+0(+0(+0(+0(+0(%di))))))))))))))))",
    "p /bin/x:0x10 b=%di:b99@0/32",
    "p /bin/x:0x10 b=%di:b4@30/32",
    "p /bin/x:0x10 s=\\\"unterminated",
    "p /bin/x:0x10 a=1(%di",
    "p /bin/x:0x10%return(",
    "p /bin/x:sym+",
    "p 0xzz",
    "r /bin/x:0x10 x=$comm:u32",
    "p /bin/x:0x10 a=%di a=%si",
    "p /bin/x:0x10 =%di",
    "p /bin/x:0x10 x=@",
    "p /bin/x:0x10 x=$arg0",
    "\tp\t/bin/x:0x10\tx=%bogus\t",
]


def spec_corpus():
    d = reset("spec")
    for i, s in enumerate(SPECS_OK):
        with open(os.path.join(d, "ok-%02d" % i), "w") as f:
            f.write(s + ("\n" if i % 3 == 0 else ""))
    for i, s in enumerate(SPECS_BAD):
        with open(os.path.join(d, "bad-%02d" % i), "w") as f:
            f.write(s)
    return d


# (name, hex bytes, modes): modes is a string of '6' and/or '3'
INSNS = [
    ("nop", "90", "63"),
    ("nop5", "0f1f440000", "63"),
    ("endbr64", "f30f1efa", "6"),
    ("endbr32", "f30f1efb", "3"),
    ("pause", "f390", "63"),
    ("jmp8", "eb10", "63"),
    ("jmp32", "e900010000", "63"),
    ("jmp32back", "e9f0ffffff", "63"),
    ("call32", "e800100000", "63"),
    ("jcc8", "7405", "63"),
    ("jcc32", "0f8480000000", "63"),
    ("jg8", "7ffe", "63"),
    ("loop", "e2fe", "63"),
    ("loope", "e1fe", "6"),
    ("loopne", "e0fe", "6"),
    ("jrcxz", "e310", "6"),
    ("jecxz", "67e310", "63"),
    ("ret", "c3", "63"),
    ("retimm", "c20800", "63"),
    ("jmpreg", "ffe0", "63"),
    ("jmpmem", "ff6008", "6"),
    ("jmprip", "ff2510000000", "6"),
    ("callreg", "ffd0", "63"),
    ("callmem", "ff5008", "63"),
    ("callrip", "ff1510000000", "6"),
    ("bndjmp", "f2e900010000", "6"),
    ("notrackjmp", "3effe0", "6"),
    ("pushrbp", "55", "63"),
    ("pushr12", "4154", "6"),
    ("pushimm8", "6a01", "63"),
    ("pushimm32", "6878563412", "63"),
    ("push16", "6655", "63"),
    ("poprbp", "5d", "63"),
    ("popr12", "415c", "6"),
    ("poprsp", "5c", "6"),
    ("pushmem", "ff7008", "63"),
    ("movrsp", "4889e5", "6"),
    ("subrsp", "4883ec28", "6"),
    ("mov32", "89e5", "3"),
    ("leariprel", "488d0500100000", "6"),
    ("movriprel", "488b05f0ffffff", "6"),
    ("cmpriprel", "833d1000000000", "6"),
    ("movriprelimm", "c705080000002a000000", "6"),
    ("vmovdqa_rip", "c5fd6f0510000000", "6"),
    ("evex_rip", "62f17c486f0510000000", "6"),
    ("riprel_allregs", "480fc70d10000000", "6"),
    ("cmpxchg_rip", "f0480fb10d10000000", "6"),
    ("fsload", "64488b042528000000", "6"),
    ("lockcmpxchg", "f00fb10a", "63"),
    ("rep_movsb", "f3a4", "63"),
    ("cpuid", "0fa2", "63"),
    ("syscall", "0f05", "6"),
    ("int3", "cc", "63"),
    ("int80", "cd80", "63"),
    ("int1", "f1", "63"),
    ("into", "ce", "3"),
    ("iretq", "48cf", "6"),
    ("sysret", "480f07", "6"),
    ("sysenter", "0f34", "3"),
    ("hlt", "f4", "63"),
    ("cli", "fa", "63"),
    ("in", "ec", "63"),
    ("outsb", "6e", "63"),
    ("ljmp", "ff2d10000000", "6"),
    ("ljmp32", "ea000000000800", "3"),
    ("lret", "cb", "63"),
    ("xbegin", "c7f800000000", "6"),
    ("xend", "0f01d5", "6"),
    ("xtest", "0f01d6", "6"),
    ("ud2", "0f0b", "63"),
    ("ud1", "0fb9c0", "6"),
    ("bound", "620424", "3"),
    ("enclu", "0f01d7", "6"),
    ("movss", "8ed0", "63"),
    ("popes", "07", "3"),
    ("pushes", "06", "3"),
    ("jmp16", "66eb00", "63"),
    ("riprel67", "678b0510000000", "6"),
    ("callgs32", "65ff1510000000", "3"),
    ("jmpgs32", "65ff2510000000", "3"),
    ("invalid", "0fff", "6"),
    ("invalid64", "06", "6"),
    ("truncated", "e80000", "63"),
    ("truncrip", "488b05", "6"),
    ("long15", "2e2e2e2e2e2e2e2e2e2e488b0500000000", "6"),
    ("empty", "", "6"),
]


def insn_corpus():
    d = reset("insn")
    n = 0
    for name, hexs, modes in INSNS:
        code = bytes.fromhex(hexs)
        for m in modes:
            # alternately near/low with sp in the middle, and far/high with sp at an
            # edge; rip-relative ones both ways (the far slot takes the scratch path)
            ctls = [0x00, 0x02 | 0x04 | 0x08 | 0x20]
            if "rip" not in name:
                ctls = [ctls[n % 2]]
            for c in ctls:
                ctl = c | (0 if m == "6" else 1)
                with open(os.path.join(d, "%s-%s-%02x" % (name, m, ctl)), "wb") as f:
                    f.write(bytes([ctl]) + code)
                n += 1
    return d


TINY_C = r"""
#include <stdio.h>
static int helper(int x) { return x * 3 + 1; }
int counter;
int work(int n) { int s = 0; for (int i = 0; i < n; i++) s += helper(i); return s; }
int main(int argc, char **argv) { (void)argv; counter = work(argc); printf("%d\n", counter); return 0; }
"""

START_C = r"""
void _start(void) { __asm__ volatile("mov $60, %eax; xor %edi, %edi; syscall"); }
"""


def elf_corpus():
    d = reset("elf")
    tmp = tempfile.mkdtemp()
    try:
        src = os.path.join(tmp, "tiny.c")
        with open(src, "w") as f:
            f.write(TINY_C)
        start = os.path.join(tmp, "start.c")
        with open(start, "w") as f:
            f.write(START_C)
        small = ["-Wl,-z,noseparate-code"]
        builds = [
            ("tiny-stripped", ["-Os", "-s"] + small + [src]),
            ("tiny", ["-Os"] + small + [src]),
            ("tiny32-stripped", ["-m32", "-Os", "-s"] + small + [src]),
            ("tiny32", ["-m32", "-Os"] + small + [src]),
            ("tiny.o", ["-Os", "-c", src]),
            ("tiny32.o", ["-m32", "-Os", "-c", src]),
            ("tiny-shared.so", ["-Os", "-s", "-shared", "-fPIC"] + small + [src]),
            ("tiny-nopie", ["-Os", "-no-pie"] + small + [src]),
            ("start-static", ["-Os", "-static", "-nostdlib", "-s"] + small + [start]),
            ("start-static-syms", ["-Os", "-static", "-nostdlib"] + small + [start]),
        ]
        for name, args in builds:
            out = os.path.join(d, name)
            subprocess.run(["gcc", "-o", out] + args, check=True)
        # a stripped file with a .gnu_debuglink (the lookup finds nothing: roots are off)
        full = os.path.join(d, "tiny")
        dbg = os.path.join(tmp, "tiny.debug")
        subprocess.run(["objcopy", "--only-keep-debug", full, dbg], check=True)
        subprocess.run(["objcopy", "--strip-all", "--add-gnu-debuglink=" + dbg, full,
                        os.path.join(d, "tiny-debuglink")], check=True)
        with open(os.path.join(d, "tiny-stripped"), "rb") as f:
            img = f.read()
        # truncated copies: the header only, half the file, without the section table end
        for name, cut in (("trunc-header", 64), ("trunc-half", len(img) // 2),
                          ("trunc-shdrs", len(img) - 40)):
            with open(os.path.join(d, name), "wb") as f:
                f.write(img[:cut])
        # not x86 (e_machine = EM_AARCH64), big-endian ident, not ELF at all
        bad = bytearray(img)
        bad[18:20] = (183).to_bytes(2, "little")
        with open(os.path.join(d, "aarch64"), "wb") as f:
            f.write(bad)
        bad = bytearray(img)
        bad[5] = 2
        with open(os.path.join(d, "bigendian"), "wb") as f:
            f.write(bad)
        with open(os.path.join(d, "not-elf"), "wb") as f:
            f.write(b"#!/bin/sh\necho not an ELF file\n")
        with open(os.path.join(d, "empty"), "wb") as f:
            pass
    finally:
        shutil.rmtree(tmp)
    for name in os.listdir(d):
        size = os.path.getsize(os.path.join(d, name))
        if size > 16384:
            sys.exit("make_corpus: %s is %d bytes (> 16 KiB)" % (name, size))
    return d


def main():
    targets = sys.argv[1:] or ["spec", "insn", "elf"]
    for t in targets:
        d = {"spec": spec_corpus, "insn": insn_corpus, "elf": elf_corpus}[t]()
        files = os.listdir(d)
        total = sum(os.path.getsize(os.path.join(d, x)) for x in files)
        print("%s: %d files, %d bytes" % (t, len(files), total))


if __name__ == "__main__":
    main()
