/* SPDX-License-Identifier: MIT */
/*
 * rel_big [CALLS]: big_func() is one function of 10,404 instructions (a .rept block
 * of add / lea / mov / imul / push / xor / pop / rol), called CALLS times (default 3).  The
 * reliability tests put 10,000 probes on it in one batch: each must be hit exactly
 * CALLS times, and the printed result must not change.
 */
#include <stdio.h>
#include <stdlib.h>

unsigned long big_func(unsigned long x);

/* clang-format off */
__asm__(".text\n"
	".globl big_func\n"
	".type big_func,@function\n"
	".p2align 4\n"
	"big_func:\n"
	"	mov %rdi,%rax\n"
	"	xor %edx,%edx\n"
	"	.rept 1300\n"
	"	add $1,%rax\n"
	"	lea 3(%rax,%rdx,2),%rdx\n"
	"	mov %rdx,%rcx\n"
	"	imul $7,%rcx,%rcx\n"
	"	push %rcx\n"
	"	xor %rcx,%rdx\n"
	"	pop %rcx\n"
	"	rol $9,%rax\n"
	"	.endr\n"
	"	xor %rdx,%rax\n"
	"	ret\n"
	".size big_func,.-big_func\n");
/* clang-format on */

int main(int argc, char **argv)
{
	int calls = argc > 1 ? atoi(argv[1]) : 3;
	unsigned long sum = 0;

	for (int i = 0; i < calls; i++) {
		unsigned long r = big_func((unsigned long)i * 0x9e3779b97f4a7c15ul);

		printf("call %d: %#lx\n", i, r);
		sum ^= r;
	}
	printf("calls=%d sum=%#lx\n", calls, sum);
	return 0;
}
