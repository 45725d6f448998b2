// SPDX-License-Identifier: MIT
/*
 * The control filesystem's descriptive files: README, the kernel's mini-HOWTO cut to
 * what this filesystem has (the ftrace selftests grep it for the features they test,
 * so a line is here only when the feature works), and an event's format.
 */
#include <stdio.h>
#include <string.h>

#ifdef UPROBE_HAVE_FUSE3

#include "fs/fsd.h"
#include "trace/session.h"

static const char readme[] =
	"tracing mini-HOWTO (uprobe mount: the uprobe events of tracefs):\n"
	"\n"
	"# echo 0 > tracing_on : quick way to disable tracing\n"
	"# echo 1 > tracing_on : quick way to re-enable tracing\n"
	"\n"
	" Important files:\n"
	"  trace\t\t\t- The static contents of the buffer\n"
	"\t\t\t  To clear the buffer write into this file: echo > trace\n"
	"  trace_pipe\t\t- A consuming read to see the contents of the buffer\n"
	"  current_tracer\t- function and function_graph are not here: nop only\n"
	"  README\t\t- This file\n"
	"  tracing_on\t\t- Write 0/1 to disable/enable tracing of events\n"
	"  set_event_pid\t\t- Trace and record the events of the listed pids only\n"
	"  error_log\t\t- error log for failed commands (that support it)\n"
	"  dynamic_events\t\t- Create/append/remove/show the generic dynamic events\n"
	"\t\t\t  Write into this file to define/undefine new trace events.\n"
	"  uprobe_events\t\t- Create/append/remove/show the userspace dynamic events\n"
	"\t\t\t  Write into this file to define/undefine new trace events.\n"
	"\t  accepts: event-definitions (one definition per line)\n"
	"\t   Format: p[:[<group>/][<event>]] <place> [<args>]\n"
	"\t           r[:[<group>/][<event>]] <place> [<args>]\n"
	"\t           -:[<group>/][<event>]\n"
	"   place (uprobe): <path>:<offset>[%return][(ref_ctr_offset)]\n"
	"\t     args: <name>=fetcharg[:type]\n"
	"\t fetcharg: %<register>, @<address>, @+<file-offset>,\n"
	"\t           $stack<index>, $stack, $retval, $comm, $arg<N>,\n"
	"\t           +|-[u]<offset>(<fetcharg>), \\imm-value, \\\"imm-string\"\n"
	"\t     type: s8/16/32/64, u8/16/32/64, x8/16/32/64, string, ustring,\n"
	"\t           b<bit-width>@<bit-offset>/<container-size>\n"
	"  uprobe_profile\t- hits per uprobe event\n"
	"  events/\t\t- Directory containing all trace event subsystems:\n"
	"      enable\t\t- Write 0/1 to enable/disable tracing of all events\n"
	"  events/<system>/\t- Directory containing all trace events for <system>:\n"
	"      enable\t\t- Write 0/1 to enable/disable tracing of all <system>\n"
	"\t\t\t  events\n"
	"  events/<system>/<event>/\t- Directory containing control files for\n"
	"\t\t\t  <event>:\n"
	"      enable\t\t- Write 0/1 to enable/disable tracing of <event>\n"
	"      filter\t\t- If set, only events passing filter are traced\n"
	"      trigger\t\t- If set, a command to perform when event is hit\n"
	"\t    Format: <trigger>[:count][if <filter>]\n"
	"\t   trigger: hist\n"
	"      hist trigger\t- If set, event hits are aggregated into a hash table\n"
	"\t    Format: hist:keys=<field1[,field2,...]>\n"
	"\t            [:values=<field1[,field2,...]>]\n"
	"\t            [:sort=<field1[,field2,...]>]\n"
	"\t            [:size=#entries]\n"
	"\t            [if <filter>]\n"
	"      format\t\t- The event's fields and print format\n"
	"      id\t\t- The event's number\n";

void up_fs_readme(struct text *t)
{
	text_put(t, readme, sizeof(readme) - 1);
}

/* A field's C type and printf conversion, as the kernel's fetch types have them. */
static void field_type(const struct up_type *ty, char *type, size_t tsize, const char **fmt)
{
	static const char *const u[] = { "%u", "%u", "%u", "%llu" };
	static const char *const sg[] = { "%d", "%d", "%d", "%lld" };
	static const char *const x[] = { "0x%x", "0x%x", "0x%x", "0x%llx" };
	unsigned sz = ty->size ? ty->size : 8, k = sz == 1 ? 0 : sz == 2 ? 1 : sz == 4 ? 2 : 3;

	switch (ty->kind) {
	case UP_TYPE_STRING:
		snprintf(type, tsize, "__data_loc char[]");
		*fmt = "\\\"%s\\\"";
		return;
	case UP_TYPE_S:
		snprintf(type, tsize, "s%u", sz * 8);
		*fmt = sg[k];
		return;
	case UP_TYPE_X:
		snprintf(type, tsize, "x%u", sz * 8);
		*fmt = x[k];
		return;
	default:
		snprintf(type, tsize, "u%u", sz * 8);
		*fmt = u[k];
		return;
	}
}

void up_fs_format(struct fsd *d, unsigned i, struct text *t)
{
	const struct up_spec *s = event_spec(d, i);
	unsigned off = s && s->is_return ? 24 : 16;
	const char *fmt;
	char type[32];

	if (!s)
		return;
	text_printf(t, "name: %s\nID: %u\nformat:\n", s->event, EVENT_ID_BASE + i);
	text_printf(t,
		    "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
		    "\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
		    "\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
		    "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n");
	if (s->is_return)
		text_printf(
			t,
			"\tfield:unsigned long __probe_func;\toffset:8;\tsize:8;\tsigned:0;\n"
			"\tfield:unsigned long __probe_ret_ip;\toffset:16;\tsize:8;\tsigned:0;\n");
	else
		text_printf(t,
			    "\tfield:unsigned long __probe_ip;\toffset:8;\tsize:8;\tsigned:0;\n");
	for (int k = 0; k < s->nargs; k++) {
		const struct up_type *ty = &s->args[k].type;
		unsigned sz = ty->kind == UP_TYPE_STRING ? 4 : ty->size ? ty->size : 8;

		field_type(ty, type, sizeof(type), &fmt);
		text_printf(t, "\tfield:%s %s;\toffset:%u;\tsize:%u;\tsigned:%d;\n", type,
			    s->args[k].name, off, sz,
			    ty->kind == UP_TYPE_S || ty->kind == UP_TYPE_STRING);
		off += sz;
	}
	text_printf(t, "\nprint fmt: \"%s", s->is_return ? "(%lx <- %lx)" : "(%lx)");
	for (int k = 0; k < s->nargs; k++) {
		field_type(&s->args[k].type, type, sizeof(type), &fmt);
		text_printf(t, " %s=%s", s->args[k].name, fmt);
	}
	text_printf(t, "\"%s",
		    s->is_return ? ", REC->__probe_func, REC->__probe_ret_ip" :
				   ", REC->__probe_ip");
	for (int k = 0; k < s->nargs; k++)
		text_printf(
			t, s->args[k].type.kind == UP_TYPE_STRING ? ", __get_str(%s)" : ", REC->%s",
			s->args[k].name);
	text_put(t, "\n", 1);
}

#endif /* UPROBE_HAVE_FUSE3 */
