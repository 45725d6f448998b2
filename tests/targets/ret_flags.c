// SPDX-License-Identifier: MIT
/*
 * Flags across a return: functions that return with CF, OF and SF set (and with ZF
 * and PF), their caller printing the flags it sees.  Under return probes on the fast
 * path the output must be the unprobed one: the agent's return trampoline puts the
 * flags back without popfq (tests/core.cmake, trace.fast.ret_flags).
 */
#include <stdio.h>
long retflags(long x);
__asm__(".globl retflags\n.type retflags,@function\nretflags:\n\tpush %rbp\n\tmov %rdi,%rax\n\tpop %rbp\n\tmov $0x7fffffff,%ecx\n\tadd $1,%ecx\n\tstc\n\tret\n.size retflags,.-retflags\n");
long retflags2(long x);
__asm__(".globl retflags2\n.type retflags2,@function\nretflags2:\n\tpush %rbp\n\tmov %rdi,%rax\n\tpop %rbp\n\txor %ecx,%ecx\n\tret\n.size retflags2,.-retflags2\n");
int main(void){ long f1,f2;
 __asm__ volatile("mov $5,%%rdi\n\tcall retflags\n\tpushfq\n\tpop %0" : "=r"(f1) :: "rax","rcx","rdi","memory","cc");
 __asm__ volatile("mov $5,%%rdi\n\tcall retflags2\n\tpushfq\n\tpop %0" : "=r"(f2) :: "rax","rcx","rdi","memory","cc");
 printf("%#lx %#lx\n", f1 & 0xcd5, f2 & 0xcd5); return 0; }
