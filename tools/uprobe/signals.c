// SPDX-License-Identifier: MIT
/*
 * The signals that end or interrupt a tracing loop (cli.h), shared by `trace` and `run`:
 * a stop (SIGINT, SIGTERM, SIGHUP), an interval's tick (SIGALRM), a --listen scrape
 * (SIGUSR2).  The handlers only set the flags; the loop reads them.
 */
#include <signal.h>

#include "cli.h"

volatile int cli_stop_sig;
volatile int cli_tick_due;

void cli_on_stop(int sig)
{
	cli_stop_sig = sig;
}

void cli_on_scrape(int sig)
{
	(void)sig;
	if (!cli_stop_sig)
		cli_stop_sig = CLI_STOP_TICK;
}

void cli_on_tick(int sig)
{
	(void)sig;
	cli_tick_due = 1;
	if (!cli_stop_sig)
		cli_stop_sig = CLI_STOP_TICK;
}

void cli_catch_stops(bool restart)
{
	struct sigaction sa = { .sa_handler = cli_on_stop, .sa_flags = restart ? SA_RESTART : 0 };

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}
