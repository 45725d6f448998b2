// SPDX-License-Identifier: MIT
/*
 * Event filters (src/trace/filter.c) in the kernel's syntax: parsing of || && ! and
 * parentheses with the kernel's precedence, string and numeric predicates, every refusal
 * at the right column, resolution against an event's arguments (types and operators),
 * the agent's conjunction (up_filter_conds) only where the filter is one, and evaluation
 * against a brute-force reference over a grid of values.  And the one evaluator both
 * front ends share: a bpftrace predicate (src/bt/pred.c) and the kernel-syntax filter
 * of the same logic hold on the same values.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bt/bt.h"
#include "bt/tokens.h"
#include "trace/filter.h"

static struct up_spec spec;
static struct up_filter f;

static void setup_spec(void)
{
	struct up_spec_err e;

	up_spec_free(&spec);
	assert_int_equal(up_spec_parse("r:g/ev /bin/true:0x10 n=%di:s32 m=%si:u64 "
				       "name=+0(%dx):string",
				       &spec, &e),
			 0);
}

/* f parsed and resolved against spec */
static void ok(const char *text)
{
	struct up_spec_err e = { 0 };
	char msg[256] = "";
	int rc = up_filter_parse(text, &f, &e);

	if (rc)
		print_error("'%s': %s at %d\n", text, e.msg, e.pos);
	assert_int_equal(rc, 0);
	rc = up_filter_resolve(&f, &spec, msg, sizeof(msg));
	if (rc)
		print_error("'%s': %s\n", text, msg);
	assert_int_equal(rc, 0);
}

static void bad(const char *text, int pos, const char *msg)
{
	struct up_spec_err e = { 0 };

	assert_int_equal(up_filter_parse(text, &f, &e), -EINVAL);
	if (e.pos != pos || !strstr(e.msg, msg))
		print_error("'%s': '%s' at %d, expected '%s' at %d\n", text, e.msg, e.pos, msg,
			    pos);
	assert_int_equal(e.pos, pos);
	assert_non_null(strstr(e.msg, msg));
	assert_int_equal(f.n, 0);
}

static void bad_resolve(const char *text, const char *msg)
{
	struct up_spec_err e = { 0 };
	char m[256] = "";

	assert_int_equal(up_filter_parse(text, &f, &e), 0);
	if (up_filter_resolve(&f, &spec, m, sizeof(m)) != -ENOENT)
		print_error("'%s' resolved\n", text);
	assert_int_equal(up_filter_resolve(&f, &spec, m, sizeof(m)), -ENOENT);
	if (!strstr(m, msg))
		print_error("'%s': '%s', expected '%s'\n", text, m, msg);
	assert_non_null(strstr(m, msg));
}

/* one hit: n, m, name (NULL: a fault), the thread's name, the duration */
static bool holds(int32_t n, uint64_t m, const char *name, const char *comm, uint64_t dur)
{
	struct up_fetch_value v[4];

	memset(v, 0, sizeof(v));
	v[0].type = (struct up_type){ .kind = UP_TYPE_S, .size = 4 };
	v[0].u = (uint32_t)n;
	v[1].type = (struct up_type){ .kind = UP_TYPE_U, .size = 8 };
	v[1].u = m;
	v[2].type = (struct up_type){ .kind = UP_TYPE_STRING };
	if (name) {
		v[2].str = name;
		v[2].str_len = strlen(name);
	} else {
		v[2].err = -EFAULT;
	}
	return up_filter_eval(&f, v, dur, comm);
}

static void test_parse(void **state)
{
	(void)state;
	setup_spec();
	ok("n > 1");
	assert_int_equal(f.n, 1);
	/* && binds tighter than ||: a || (b && c) */
	ok("n == 1 || n == 2 && m == 3");
	assert_int_equal(f.node[f.root].kind, UP_FILTER_OR);
	assert_int_equal(f.node[f.node[f.root].r].kind, UP_FILTER_AND);
	ok("(n == 1 || n == 2) && m == 3");
	assert_int_equal(f.node[f.root].kind, UP_FILTER_AND);
	ok("!(n == 1)");
	assert_int_equal(f.node[f.root].kind, UP_FILTER_NOT);
	ok("!n == 1"); /* ! applies to the predicate */
	assert_int_equal(f.node[f.root].kind, UP_FILTER_NOT);
	ok("name == \"alpha\"");
	assert_string_equal(f.node[0].str, "alpha");
	assert_true(f.node[0].is_str);
	ok("name ~ 'al*'");
	assert_int_equal(f.node[0].op, UP_FILTER_GLOB);
	ok("COMM == 'bash'");
	assert_int_equal(f.node[0].fetch, UP_FILTER_COMM);
	ok("common_comm != \"x y\"");
	ok("n>=-3&&m&0x10||$duration<100");
	ok("((((n == 1))))");
	ok("n == -2147483648 || m == 0xffffffffffffffff");
}

static void test_parse_errors(void **state)
{
	(void)state;
	bad("a >> 4", 3, "expected a number");
	bad("", 0, "expected a field name");
	bad("n == 1 &&", 9, "expected a field name");
	bad("n == 1 || || m", 10, "expected a field name");
	bad("(n == 1", 7, "expected ) to close");
	bad("n == 1)", 6, "expected && || ) or the end");
	bad("n = 1", 2, "expected one of == != < <= > >= & ~");
	bad("n == 1 & m == 2", 7, "expected && || ) or the end");
	bad("n == 12abc", 5, "expected a number");
	bad("name == \"abc", 8, "not closed");
	bad("1 == n", 0, "expected a field name");
	bad("comm == bash", 8, "invalid value (did you forget quotes?)");
	bad("n == 1 n == 2", 7, "expected && || ) or the end");
	bad("((((((((((((((((((n == 1))))))))))))))))))", 16, "nested too deep");
	{
		char big[1024] = "n == 1";

		for (int i = 0; i < 60; i++)
			strcat(big, " || n == 1");
		assert_int_equal(up_filter_parse(big, &f, NULL), -EINVAL);
	}
}

static void test_resolve(void **state)
{
	(void)state;
	setup_spec();
	bad_resolve("zz > 1", "'zz' is not an argument of g/ev");
	bad_resolve("name < \"a\"", "is a string: it takes == != ~ only");
	bad_resolve("comm & 1", "is a string");
	bad_resolve("n ~ \"1*\"", "is a number: ~ is for strings");
	bad_resolve("n == \"12\"", "is a number: '12' is not one");
	{
		struct up_spec p;
		struct up_spec_err e;
		char m[256];

		assert_int_equal(up_spec_parse("p:g/e /bin/true:0x10 a=%di", &p, &e), 0);
		assert_int_equal(up_filter_parse("$duration > 5", &f, &e), 0);
		assert_int_equal(up_filter_resolve(&f, &p, m, sizeof(m)), -ENOENT);
		assert_non_null(strstr(m, "return probe's"));
		up_spec_free(&p);
	}
}

static void test_conds(void **state)
{
	struct uprobe_cond c[UP_FILTER_MAX];

	(void)state;
	setup_spec();
	ok("n > 1 && m & 4 && $duration < 9");
	assert_int_equal(up_filter_conds(&f, c, UP_FILTER_MAX), 3);
	assert_int_equal(c[0].fetch, 0);
	assert_int_equal(c[0].op, UPROBE_GT);
	assert_int_equal(c[1].fetch, 1);
	assert_int_equal(c[1].op, UPROBE_AND);
	assert_int_equal(c[2].fetch, UPROBE_COND_DURATION);
	ok("(n > 1 && m > 2) && n < 9");
	assert_int_equal(up_filter_conds(&f, c, UP_FILTER_MAX), 3);
	/* what the agent does not take: the tracer's */
	ok("n > 1 || m > 2");
	assert_int_equal(up_filter_conds(&f, c, UP_FILTER_MAX), -1);
	ok("!(n > 1)");
	assert_int_equal(up_filter_conds(&f, c, UP_FILTER_MAX), -1);
	ok("n > 1 && name == \"a\"");
	assert_int_equal(up_filter_conds(&f, c, UP_FILTER_MAX), -1);
	ok("comm ~ \"a*\"");
	assert_int_equal(up_filter_conds(&f, c, UP_FILTER_MAX), -1);
	assert_true(up_filter_uses(&f, UP_FILTER_COMM));
	assert_false(up_filter_uses(&f, UPROBE_COND_DURATION));
	ok("n>0 && n>1 && n>2 && n>3 && n>4 && n>5 && n>6 && n>7 && n>8");
	assert_int_equal(up_filter_conds(&f, c, UP_FILTER_MAX), -1); /* 9 > UP_FILTER_MAX */
	memset(&f, 0, sizeof(f));
	assert_int_equal(up_filter_conds(&f, c, UP_FILTER_MAX), 0);
	assert_true(holds(0, 0, "x", "y", 0)); /* no filter */
}

static void test_eval(void **state)
{
	(void)state;
	setup_spec();
	ok("n < 0 || name == \"bravo\"");
	assert_true(holds(-1, 0, "alpha", "p", 0));
	assert_true(holds(3, 0, "bravo", "p", 0));
	assert_false(holds(3, 0, "bravox", "p", 0));
	assert_false(holds(3, 0, NULL, "p", 0)); /* a fault holds nothing */
	ok("!(name == \"bravo\")");
	assert_true(holds(3, 0, NULL, "p", 0)); /* !(fault == x): the fault's false negated */
	/* the kernel's globs: prefix, suffix, both, ?, [] */
	ok("name ~ \"br*\"");
	assert_true(holds(0, 0, "bravo", "", 0));
	assert_false(holds(0, 0, "abravo", "", 0));
	ok("name ~ \"*vo\"");
	assert_true(holds(0, 0, "bravo", "", 0));
	assert_false(holds(0, 0, "bravox", "", 0));
	ok("name ~ \"*av*\"");
	assert_true(holds(0, 0, "bravo", "", 0));
	assert_false(holds(0, 0, "alpha", "", 0));
	ok("name ~ \"?lph[a-c]\"");
	assert_true(holds(0, 0, "alpha", "", 0));
	assert_false(holds(0, 0, "alphd", "", 0));
	ok("name == \"br*\""); /* == is exact, no glob */
	assert_false(holds(0, 0, "bravo", "", 0));
	assert_true(holds(0, 0, "br*", "", 0));
	ok("comm ~ \"py*\" && comm != 'python2'");
	assert_true(holds(0, 0, "", "python3", 0));
	assert_false(holds(0, 0, "", "python2", 0));
	assert_false(holds(0, 0, "", "perl", 0));
	assert_false(holds(0, 0, "", NULL, 0));
	ok("n >= -2 && n < 2");
	assert_true(holds(-2, 0, "", "", 0));
	assert_false(holds(-3, 0, "", "", 0));
	assert_false(holds(2, 0, "", "", 0));
	ok("$duration > 100 || m & 0x8");
	assert_true(holds(0, 8, "", "", 0));
	assert_true(holds(0, 0, "", "", 101));
	assert_false(holds(0, 0, "", "", 100));
}

/* Every filter of a set of shapes over a grid of values, against C's own logic. */
static void test_eval_grid(void **state)
{
	static const char *const names[] = { "alpha", "bravo", "charlie" };
	char text[256];

	(void)state;
	setup_spec();
	for (int a = -2; a <= 2; a++)
		for (int b = 0; b <= 3; b++) {
			snprintf(text, sizeof(text),
				 "!(n < %d || m == %d) && (name ~ \"*a*\" || !(n != %d)) || m & %d",
				 a, b, b, b);
			ok(text);
			for (int n = -3; n <= 3; n++)
				for (uint64_t m = 0; m <= 4; m++)
					for (int k = 0; k < 3; k++) {
						bool want =
							(!(n < a || m == (uint64_t)b) &&
							 (strchr(names[k], 'a') || !(n != b))) ||
							(m & (uint64_t)b);

						assert_int_equal(holds(n, m, names[k], "c", 0),
								 want);
					}
		}
}

/* A bpftrace predicate's fields, as interp.c evaluates them, for the shapes below:
   arg0, arg1, comm, arg1 & INT, -INT. */
struct bt_vals {
	const struct bt_probe *p;
	int32_t n;
	uint64_t m;
	const char *comm;
};

static void bt_field(void *ctx, uint32_t i, struct up_pred_val *out)
{
	const struct bt_vals *bv = ctx;
	const struct bt_node *x = bv->p->pleaf[i];

	if (x->k == BT_N_UN && x->op == T_MINUS && x->a->k == BT_N_INT) {
		out->u = 0 - (uint64_t)x->a->ival; /* -N: a negative literal, signed */
		out->is_signed = true;
		return;
	}
	if (x->k == BT_N_BIN && x->op == T_AMP) {
		out->u = bv->m & (uint64_t)x->b->ival;
		return;
	}
	assert_int_equal(x->k, BT_N_BUILTIN);
	if (x->ival == BT_B_COMM) {
		out->is_str = true;
		out->s = bv->comm;
		out->len = strlen(bv->comm);
	} else {
		out->u = x->ival == BT_B_ARG0 ? (uint64_t)(int64_t)bv->n : bv->m;
	}
}

static unsigned count_kind(const struct up_filter *x, int kind)
{
	unsigned c = 0;

	for (unsigned i = 0; i < x->n; i++)
		c += x->node[i].kind == kind;
	return c;
}

/* The same logic in both syntaxes: the same tree of && || !, the same answers. */
static void test_two_syntaxes(void **state)
{
	static const char *const comms[] = { "alpha", "bravo" };
	char text[256], err[512];

	(void)state;
	setup_spec();
	for (int a = -2; a <= 2; a++)
		for (int b = 1; b <= 3; b++) {
			struct bt_prog *prog = NULL;
			const struct up_filter *c;

			snprintf(text, sizeof(text),
				 "uprobe:/bin/true:main /!(arg0 < %d || arg1 == %d) && "
				 "(comm == \"bravo\" || !(arg0 != %d)) || arg1 & %d/ { @ = count(); }",
				 a, b, b, b);
			assert_int_equal(bt_parse(text, "stdin", &prog, err, sizeof(err)), 0);
			c = prog->probes[0].cpred;
			assert_non_null(c);
			snprintf(text, sizeof(text),
				 "!(n < %d || m == %d) && (comm == \"bravo\" || !(n != %d)) || m & %d",
				 a, b, b, b);
			ok(text);
			for (int k = UP_FILTER_PRED; k <= UP_FILTER_NOT; k++)
				assert_int_equal(count_kind(c, k), count_kind(&f, k));
			for (int n = -3; n <= 3; n++)
				for (uint64_t m = 0; m <= 4; m++)
					for (int k = 0; k < 2; k++) {
						struct bt_vals bv = { &prog->probes[0], n, m, comms[k] };

						assert_int_equal(up_filter_eval_fn(c, bt_field, &bv),
								 holds(n, m, "", comms[k], 0));
					}
			bt_prog_free(prog);
		}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),	cmocka_unit_test(test_parse_errors),
		cmocka_unit_test(test_resolve), cmocka_unit_test(test_conds),
		cmocka_unit_test(test_eval),	cmocka_unit_test(test_eval_grid),
		cmocka_unit_test(test_two_syntaxes),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);

	up_spec_free(&spec);
	return rc;
}
