// SPDX-License-Identifier: MIT
/*
 * A probe's predicate, compiled into the nodes that `uprobe trace --filter` evaluates
 * (trace/filter.h): bpftrace's && || ! and its comparisons become the filter's
 * AND/OR/NOT and comparisons, so that both front ends hold or fail a predicate in one
 * evaluator (up_filter_eval_fn).  The operands -- any other expression: builtins, map
 * reads, casts, arithmetic, str() -- are the filter's fields, which interp.c evaluates
 * when the evaluator asks (a comparison with a literal keeps the literal as the node's
 * value); an expression that is none of these is one field whose truth is the
 * predicate's (UP_FILTER_TRUTH).  A predicate of more nodes than one filter holds is
 * one such field as a whole.  Never prints.  Prefix: bt_pred_.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bt/bt.h"
#include "bt/tokens.h"
#include "trace/filter.h"

#define LEAVES (2 * UP_FILTER_NODES)

struct comp {
	struct up_filter *f;
	struct bt_node **leaf;
	unsigned nleaf;
};

static int node_new(struct comp *c)
{
	if (c->f->n >= UP_FILTER_NODES || c->nleaf + 2 > LEAVES)
		return -1;
	memset(&c->f->node[c->f->n], 0, sizeof(c->f->node[0]));
	return (int)c->f->n++;
}

static uint32_t leaf(struct comp *c, struct bt_node *n)
{
	c->leaf[c->nleaf] = n;
	return c->nleaf++;
}

static int cmp_op(int tok)
{
	switch (tok) {
	case T_EQ:
		return UPROBE_EQ;
	case T_NE:
		return UPROBE_NE;
	case T_LT:
		return UPROBE_LT;
	case T_LE:
		return UPROBE_LE;
	case T_GT:
		return UPROBE_GT;
	case T_GE:
		return UPROBE_GE;
	}
	return -1;
}

static int comp(struct comp *c, struct bt_node *n)
{
	struct up_filter_node *nd;
	int i, l, r;

	if ((n->k == BT_N_BIN && (n->op == T_LAND || n->op == T_LOR)) ||
	    (n->k == BT_N_UN && n->op == T_NOT)) {
		l = comp(c, n->a);
		r = n->k == BT_N_BIN ? comp(c, n->b) : 0;
		if (l < 0 || r < 0 || (i = node_new(c)) < 0)
			return -1;
		nd = &c->f->node[i];
		nd->kind = n->k == BT_N_UN ? UP_FILTER_NOT :
			   n->op == T_LAND ? UP_FILTER_AND :
					     UP_FILTER_OR;
		nd->l = (int16_t)l;
		nd->r = (int16_t)r;
		return i;
	}
	if ((i = node_new(c)) < 0)
		return -1;
	nd = &c->f->node[i];
	nd->kind = UP_FILTER_PRED;
	nd->pos = n->col;
	if (n->k == BT_N_BIN && cmp_op(n->op) >= 0) {
		nd->op = (uint8_t)cmp_op(n->op);
		nd->fetch = leaf(c, n->a);
		if (n->b->k == BT_N_INT) {
			/* a literal is signed: a comparison with one is (interp.c arith) */
			nd->is_num = true;
			nd->value = n->b->ival;
			nd->const_signed = true;
		} else if (n->b->k == BT_N_STR && strlen(n->b->s) <= UP_FILTER_STR_MAX) {
			strcpy(nd->str, n->b->s);
		} else {
			nd->rfield = true;
			nd->rfetch = leaf(c, n->b);
		}
		return i;
	}
	nd->op = UP_FILTER_TRUTH;
	nd->fetch = leaf(c, n);
	return i;
}

int bt_pred_compile(struct bt_probe *p)
{
	struct comp c;
	int root;

	if (!p->pred)
		return 0;
	c.f = calloc(1, sizeof(*c.f));
	c.leaf = calloc(LEAVES, sizeof(*c.leaf));
	c.nleaf = 0;
	if (!c.f || !c.leaf) {
		free(c.f);
		free(c.leaf);
		return -ENOMEM;
	}
	root = comp(&c, p->pred);
	if (root < 0) {
		/* too big for one filter: the whole predicate is one field */
		memset(c.f, 0, sizeof(*c.f));
		c.nleaf = 0;
		c.f->n = 1;
		c.f->node[0].kind = UP_FILTER_PRED;
		c.f->node[0].op = UP_FILTER_TRUTH;
		c.f->node[0].fetch = leaf(&c, p->pred);
		root = 0;
	}
	c.f->root = root;
	p->cpred = c.f;
	p->pleaf = c.leaf;
	return 0;
}

void bt_pred_free(struct bt_probe *p)
{
	free(p->cpred);
	free(p->pleaf);
	p->cpred = NULL;
	p->pleaf = NULL;
}
