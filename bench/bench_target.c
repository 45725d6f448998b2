// SPDX-License-Identifier: MIT
/*
 * The program the core benchmark probes: `bench_target MODE N` calls one tiny
 * function N times.  Each function's first instruction is one of a plan's kind:
 *   nop:     hot_nop starts with a 5-byte nop       (emulated)
 *   emulate: hot_emulate starts with push %rbp      (emulable; run in a slot)
 *   xol:     hot_xol starts with lea 1(%rdi),%rax   (run free in a slot)
 *   step:    hot_step's syscall (getppid)           (single-stepped in a slot)
 *   int3:    hot_int3 executes an int3 of its own   (a bare ptrace stop, no probe)
 *   none:    hot_emulate, unprobed                  (the loop's own cost)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void hot_emulate(void);
void hot_nop(void);
long hot_xol(long);
long hot_step(void);
void hot_int3(void);

__asm__(".text\n"
	".globl hot_emulate\n.type hot_emulate,@function\nhot_emulate:\n"
	"	push %rbp\n	pop %rbp\n	ret\n.size hot_emulate,.-hot_emulate\n"
	".globl hot_nop\n.type hot_nop,@function\nhot_nop:\n"
	"	nopl 0x0(%rax,%rax,1)\n	ret\n.size hot_nop,.-hot_nop\n"
	".globl hot_xol\n.type hot_xol,@function\nhot_xol:\n"
	"	lea 1(%rdi),%rax\n	ret\n.size hot_xol,.-hot_xol\n"
	".globl hot_step\n.type hot_step,@function\nhot_step:\n"
	"	mov $110,%eax\n.globl hot_step_syscall\nhot_step_syscall:\n	syscall\n	ret\n"
	".size hot_step,.-hot_step\n"
	".globl hot_int3\n.type hot_int3,@function\nhot_int3:\n"
	"	int3\n	ret\n.size hot_int3,.-hot_int3\n");

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "none";
	long n = argc > 2 ? atol(argv[2]) : 1000, acc = 0;

	for (long i = 0; i < n; i++) {
		if (!strcmp(mode, "xol"))
			acc += hot_xol(i);
		else if (!strcmp(mode, "step") || !strcmp(mode, "syscall"))
			acc += hot_step();
		else if (!strcmp(mode, "nop"))
			hot_nop();
		else if (!strcmp(mode, "int3"))
			hot_int3();
		else
			hot_emulate();
	}
	printf("%ld\n", acc != 0);
	return 0;
}
