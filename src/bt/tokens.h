/* SPDX-License-Identifier: MIT */
/*
 * The parser's tokens (the op of BT_N_BIN, BT_N_UN, BT_N_ASSIGN and BT_N_INCDEC nodes)
 * and the functions it knows (the op of BT_N_CALL nodes): shared by parse.c and
 * interp.c only.
 */
#ifndef UPROBE_BT_TOKENS_H
#define UPROBE_BT_TOKENS_H

enum tok {
	T_EOF, T_INT, T_STR, T_IDENT, T_MAP, T_VAR, T_POS,
	T_LP, T_RP, T_LB, T_RB, T_LBR, T_RBR, T_COMMA, T_SEMI, T_COLON, T_QUEST, T_DOT,
	T_PLUS, T_MINUS, T_STAR, T_SLASH, T_PCT, T_AMP, T_PIPE, T_CARET, T_SHL, T_SHR,
	T_EQ, T_NE, T_LT, T_LE, T_GT, T_GE, T_LAND, T_LOR, T_NOT, T_TILDE, T_ASSIGN,
	T_ADDEQ, T_SUBEQ, T_MULEQ, T_DIVEQ, T_MODEQ, T_ANDEQ, T_OREQ, T_XOREQ, T_SHLEQ,
	T_SHREQ, T_INC, T_DEC, T_ARROW,
};

/* Functions: the ones taken, and the ones of bpftrace's that are refused by name. */
enum fn {
	F_COUNT, F_SUM, F_AVG, F_MIN, F_MAX, F_STATS, F_HIST, F_LHIST, F_PRINTF, F_PRINT,
	F_TIME, F_EXIT, F_DELETE, F_CLEAR, F_ZERO, F_STR, F_USYM, F_USTACK, F_STRFTIME, F_NTOP,
	F_NFN,
};

#endif
