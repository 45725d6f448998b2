/* SPDX-License-Identifier: MIT */
/*
 * x86 instruction analysis for probing (the seed's arch/x86 ubp layer, over Zydis).
 *
 * For one instruction at a virtual address this decides how a probed copy of it is
 * executed: emulated in the tracer, run free out of line (xol), single-stepped out of
 * line (step), or refused (reject, with a reason a user can read).  It relocates an
 * instruction into a slot at a given address and emulates the emulable ones on a
 * register set.
 *
 * It knows nothing of ptrace or processes: memory is reached through a callback, the
 * register set is the kernel's user_regs_struct (the layout PTRACE_GETREGS returns for
 * both 64- and 32-bit tracees).  It never allocates and never reads past the buffer
 * it is given.  Prefix: up_insn_, up_reloc_.
 */
#ifndef UPROBE_ARCH_X86_INSN_H
#define UPROBE_ARCH_X86_INSN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/user.h>

#include <Zydis/Zydis.h>

#define UP_INSN_MAX 15 /* the architectural limit */
#define UP_BKPT_INSN 0xcc
#define UP_SLOT_MAX 64 /* room for any relocated instruction plus its way back */

enum up_insn_plan {
	UP_PLAN_EMULATE, /* applied to the registers by the tracer; no slot */
	UP_PLAN_XOL,	 /* copied into a slot followed by a jump back; runs free */
	UP_PLAN_STEP,	 /* copied into a slot and single-stepped, then fixed up */
	UP_PLAN_REJECT,	 /* cannot be probed; see the reason */
};

/*
 * Why an instruction got its plan.  The first group explains accepted plans, the
 * second (from UP_WHY_REJECT_FIRST on) the refusals.  up_insn_reason_str() gives the
 * message, up_insn_reason_name() a short stable identifier for tools and tests.
 */
enum up_insn_reason {
	UP_WHY_NONE = 0,
	/* emulate */
	UP_WHY_EMU_NOP,	     /* nop, multi-byte nop, endbr, pause, hint nops */
	UP_WHY_EMU_JMP,	     /* jmp rel8/rel32 */
	UP_WHY_EMU_CALL,     /* call rel32 */
	UP_WHY_EMU_JCC,	     /* jcc rel8/rel32 */
	UP_WHY_EMU_LOOP,     /* loop, loope, loopne, jcxz/jecxz/jrcxz */
	UP_WHY_EMU_RET,	     /* ret, ret imm16 */
	UP_WHY_EMU_JMP_IND,  /* jmp through a register or memory */
	UP_WHY_EMU_CALL_IND, /* call through a register or memory */
	UP_WHY_EMU_PUSH,     /* push reg, push imm */
	UP_WHY_EMU_POP,	     /* pop reg */
	/* xol */
	UP_WHY_XOL_PLAIN,  /* position-independent: runs unchanged in a slot */
	UP_WHY_XOL_RIPREL, /* rip-relative operand re-encoded for the slot */
	/* step */
	UP_WHY_STEP_SYSCALL,   /* syscall: rcx must hold the home return address */
	UP_WHY_STEP_CALL_SEG,  /* call through fs:/gs: memory: return address fixed up */
	UP_WHY_STEP_JMP_SEG,   /* jmp through fs:/gs: memory: rip is the target */
	UP_WHY_STEP_RIPREL_FAR, /* rip-relative, slot beyond +-2 GiB: scratch register */

	/* reject */
	UP_WHY_REJECT_FIRST,
	UP_WHY_REJECT_INT3 = UP_WHY_REJECT_FIRST, /* an int3 is already there */
	UP_WHY_REJECT_INT,			  /* int n, int1, into */
	UP_WHY_REJECT_IRET,			  /* iret, sysret, sysexit */
	UP_WHY_REJECT_PRIVILEGED,		  /* ring-0 only: would fault */
	UP_WHY_REJECT_SYSTEM,			  /* sysenter, segment loads, … */
	UP_WHY_REJECT_IO,			  /* in/out/ins/outs */
	UP_WHY_REJECT_FAR,			  /* far jmp/call/ret */
	UP_WHY_REJECT_TSX,			  /* xbegin/xend */
	UP_WHY_REJECT_UNDEFINED,		  /* ud0/ud1/ud2: meant to fault */
	UP_WHY_REJECT_INVALID,			  /* the bytes do not decode */
	UP_WHY_REJECT_TRUNCATED,		  /* the buffer ends mid-instruction */
	UP_WHY_REJECT_PREFIX,			  /* 66 on a branch, 67 on rip-relative */
	UP_WHY_REJECT_BOUND,			  /* bound: #BR traps */
	UP_WHY_REJECT_ENCLAVE,			  /* SGX enclu/encls */
	UP_WHY_REJECT_UNRELOCATABLE,		  /* the encoder cannot place it in a slot */
	UP_WHY_COUNT
};

enum up_insn_mode {
	UP_MODE_64 = 64,
	UP_MODE_32 = 32,
};

/* How a control transfer the emulator knows about behaves. */
enum up_insn_emu {
	UP_EMU_NONE,
	UP_EMU_NOP,
	UP_EMU_JMP,
	UP_EMU_CALL,
	UP_EMU_JCC,
	UP_EMU_LOOP,
	UP_EMU_LOOPE,
	UP_EMU_LOOPNE,
	UP_EMU_JCXZ,
	UP_EMU_RET,
	UP_EMU_JMP_IND,
	UP_EMU_CALL_IND,
	UP_EMU_PUSH_REG,
	UP_EMU_PUSH_IMM,
	UP_EMU_POP_REG,
};

/*
 * Operand 0 as the emulator and the jump-table scan read it: a register, or a memory
 * operand's parts.
 */
struct up_insn_op {
	ZydisOperandType type;
	ZydisRegister reg;		    /* a register operand */
	ZydisRegister base, index, segment; /* a memory operand */
	uint8_t scale;
	bool has_disp;
	int64_t disp;
};

/*
 * One analysed instruction: what a probe keeps of it for as long as it lives (about
 * 100 bytes; with the whole decode kept, 10,000 probes touched 12 MB more, and
 * inserting them took 2.5 times as long).  Caller-owned.  The whole decode is
 * up_insn_decode's, on demand.
 */
struct up_insn {
	uint64_t vaddr;
	uint8_t bytes[UP_INSN_MAX];
	uint8_t length;
	uint8_t mode; /* enum up_insn_mode */
	bool rip_relative;
	bool is_branch_rel; /* relative jmp/call/jcc/loop */
	enum up_insn_plan plan;
	enum up_insn_reason reason;
	enum up_insn_emu emu;
	uint8_t cc;	  /* for UP_EMU_JCC: the condition, low nibble of the opcode */
	uint64_t target;  /* absolute target of a relative branch, or rip-relative address */
	int64_t imm;	  /* push imm (sign-extended), ret imm16 */
	uint8_t op_size;  /* operand size in bytes of push/pop/call/ret */
	uint8_t address_width, operand_width; /* in bits, as Zydis reports them */
	uint8_t disp_offset;		      /* where the displacement is in bytes, if any */
	ZydisMnemonic mnemonic;
	struct up_insn_op op0;
};

/* The whole Zydis decode (about 1.1 KiB): analysis, relocation and formatting read it. */
struct up_insn_dec {
	ZydisDecodedInstruction zi;
	ZydisDecodedOperand zops[ZYDIS_MAX_OPERAND_COUNT];
};

/* Decodes insn's bytes again, whole.  0, or -EINVAL when they do not decode. */
int up_insn_decode(const struct up_insn *insn, struct up_insn_dec *d);

/*
 * Decodes the instruction at the start of buf (len bytes, which may be more or less
 * than the instruction) found at vaddr, and plans it.  Returns 0, or -EINVAL when the
 * mode is not 32 or 64.  An undecodable or truncated instruction is not an error: it
 * gets UP_PLAN_REJECT with UP_WHY_REJECT_INVALID or _TRUNCATED and length 0.
 */
int up_insn_analyze(struct up_insn *insn, const void *buf, size_t len, uint64_t vaddr,
		    enum up_insn_mode mode);

/* Only the length (0 when invalid or truncated); cheaper than up_insn_analyze. */
unsigned up_insn_length(const void *buf, size_t len, enum up_insn_mode mode);

const char *up_insn_plan_str(enum up_insn_plan plan);
const char *up_insn_reason_str(enum up_insn_reason why);
const char *up_insn_reason_name(enum up_insn_reason why);

/* Formats the instruction in AT&T syntax ("mov %rsp, %rbp"); returns buf. */
char *up_insn_format(const struct up_insn *insn, char *buf, size_t size);

/* ---- relocation ------------------------------------------------------------------ */

enum up_reloc_fix {
	UP_FIX_NONE = 0,
	UP_FIX_IP = 1 << 0,	  /* after the step rip is relative to the slot: rebase it */
	UP_FIX_CALL = 1 << 1,	  /* the pushed return address points into the slot */
	UP_FIX_SYSCALL_RCX = 1 << 2, /* rcx got the slot's return address */
	UP_FIX_SCRATCH = 1 << 3,  /* scratch register loaded before, restored after */
};

/* The code for one slot, and how to run it. */
struct up_reloc {
	uint8_t code[UP_SLOT_MAX];
	uint8_t len;	  /* bytes of code[] to write at the slot */
	uint8_t insn_len; /* length of the relocated instruction, at code[0] */
	bool step;	  /* single-step code[0..insn_len); else it runs free to the jump back */
	unsigned fixups;  /* enum up_reloc_fix, for step */
	ZydisRegister scratch;	/* UP_FIX_SCRATCH: the register, full width */
	uint64_t scratch_value; /* and the value it must hold during the step */
};

/*
 * Writes the slot code for insn placed at slot.  An xol-planned instruction gets its
 * rip-relative operand or relative branch re-encoded for the slot and a jump back to
 * the next instruction; a step-planned one (and any xol one whose rip-relative operand
 * cannot reach from the slot) gets the code to single-step and the fixups to apply.
 * Emulate-planned instructions relocate too, as a fallback for when emulation faults.
 * Returns 0, -ENOTSUP for a rejected instruction, -ERANGE when the encoder cannot
 * produce the code.
 */
int up_reloc_build(const struct up_insn *insn, uint64_t slot, struct up_reloc *out);

/* State a step keeps between its start and finish (per thread). */
struct up_reloc_step {
	uint64_t saved_scratch;
};

/* Register accessor by Zydis register id (full-width GPRs and rip). */
uint64_t *up_regs_gpr(struct user_regs_struct *regs, ZydisRegister reg);

/*
 * Memory access for the emulator and fixups: reads (write == false) or writes len bytes
 * at addr in the traced process.  Returns 0 or a negative errno.
 */
typedef int (*up_insn_mem_fn)(void *ctx, uint64_t addr, void *buf, size_t len, bool write);

/* Before a step: rip to the slot, scratch register loaded. */
void up_reloc_step_begin(const struct up_insn *insn, const struct up_reloc *rel, uint64_t slot,
			 struct user_regs_struct *regs, struct up_reloc_step *st);

/* After a step that trapped with rip past the slot's instruction: apply the fixups. */
int up_reloc_step_finish(const struct up_insn *insn, const struct up_reloc *rel, uint64_t slot,
			 struct user_regs_struct *regs, const struct up_reloc_step *st,
			 up_insn_mem_fn mem, void *ctx);

/*
 * A thread stopped (a signal, a fault) with rip inside the slot: returns the address
 * rip must have at home so the program sees what it would have seen unprobed -- the
 * instruction's own address when it has not completed (it will run again, by the
 * probe, or faulted there), the next instruction's when it has.  0 when rip is not
 * in this slot.
 */
uint64_t up_reloc_home_rip(const struct up_insn *insn, const struct up_reloc *rel, uint64_t slot,
			   uint64_t rip);

/* ---- emulation ------------------------------------------------------------------- */

/*
 * Applies an UP_PLAN_EMULATE instruction to regs (rip is the instruction's address on
 * entry and the next one on return).  Stack and memory operands go through mem.
 * Returns 0, -ENOTSUP for an instruction that is not emulated, or the errno of a
 * failed memory access -- then regs are unchanged and the caller executes the
 * instruction out of line so that the program takes the fault itself.
 */
int up_insn_emulate(const struct up_insn *insn, struct user_regs_struct *regs, up_insn_mem_fn mem,
		    void *ctx);

#endif
