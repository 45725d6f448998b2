// SPDX-License-Identifier: MIT
/*
 * --listen HOST:PORT: the session's metrics served over HTTP for Prometheus (cli.h).
 *
 * libmicrohttpd serves from its own thread, with every signal blocked there; it never
 * touches the session.  A GET /metrics asks the main thread for a fresh rendering: it
 * marks the request, wakes the main thread (an eventfd its poll loop watches, and for
 * `trace`, whose loop waits in the library, SIGUSR2: the loop returns -EINTR as an -i
 * period does), and waits at most WAIT_MS for the main thread to render the
 * session into a buffer between two turns of the loop (cli_listen_serve).  So tracing
 * never waits on a client: a slow, malformed or hostile one costs the server's thread
 * at most its connection timeout and request memory, both bounded here, and the traced
 * process is not involved at all.  If the main thread is busy longer, the last
 * rendering is served (or 503 before the first).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "trace/session.h"

#define WAIT_MS 2000		/* a scrape waits this long for a fresh rendering */
#define CONN_TIMEOUT_S 10	/* an idle or slow connection is closed after this */
#define CONN_LIMIT 64		/* connections at once, all clients */
#define CONN_MEMORY (16 * 1024) /* request line and headers, per connection */

static const char CT_TEXT[] = "text/plain; version=0.0.4; charset=utf-8";
static const char CT_OM[] = "application/openmetrics-text; version=1.0.0; charset=utf-8";

struct cli_listen {
	struct MHD_Daemon *d;
	pthread_t main;
	bool signal_main; /* wake it with SIGUSR2 too, not only efd */
	int efd;	  /* an eventfd, readable while a scrape waits */
	pthread_mutex_t lock;
	pthread_cond_t done;
	unsigned want;	 /* 1 << om: renderings asked for */
	uint64_t gen[2]; /* renderings made, per format */
	char *text[2];	 /* the last ones */
	size_t len[2];
	unsigned max_series;
	uint64_t scrapes;
	char where[128];
};

static struct MHD_Response *from_text(const char *s, size_t n)
{
	return MHD_create_response_from_buffer(n, (void *)s, MHD_RESPMEM_MUST_COPY);
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, const char *type,
			     const char *body, size_t n)
{
	struct MHD_Response *r = from_text(body, n);
	enum MHD_Result ret;

	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	ret = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result plain(struct MHD_Connection *c, unsigned code, const char *msg)
{
	return reply(c, code, "text/plain; charset=utf-8", msg, strlen(msg));
}

/* OpenMetrics when the scraper lists it in Accept (Prometheus does, first). */
static bool wants_om(struct MHD_Connection *c)
{
	const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);

	return a && strstr(a, "application/openmetrics-text");
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **state)
{
	struct cli_listen *l = cls;
	bool om, head = !strcmp(method, MHD_HTTP_METHOD_HEAD);
	struct timespec until;
	enum MHD_Result ret;
	uint64_t gen;
	char *body = NULL;
	size_t n = 0;

	(void)version;
	(void)upload;
	/* the headers are in: anything but GET or HEAD of /metrics is answered at once,
	   before a body, if any, is read (MHD then closes the connection) */
	if (strcmp(method, MHD_HTTP_METHOD_GET) && !head)
		return plain(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET /metrics is served\n");
	if (strcmp(url, "/metrics"))
		return plain(c, MHD_HTTP_NOT_FOUND, "uprobe serves its metrics at /metrics\n");
	if (!*state) { /* a GET's body, if it has one, comes next: ignored */
		*state = l;
		return MHD_YES;
	}
	if (*upload_size) {
		*upload_size = 0;
		return MHD_YES;
	}
	om = wants_om(c);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += WAIT_MS / 1000;
	until.tv_nsec += (WAIT_MS % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&l->lock);
	gen = l->gen[om];
	l->want |= 1u << om;
	l->scrapes++;
	if (eventfd_write(l->efd, 1)) {
		/* cannot fail short of an overflow of 2^64 scrapes */
	}
	if (l->signal_main)
		pthread_kill(l->main, SIGUSR2);
	while (l->gen[om] == gen)
		if (pthread_cond_timedwait(&l->done, &l->lock, &until) == ETIMEDOUT)
			break;
	if (l->text[om]) {
		n = l->len[om];
		body = malloc(n ? n : 1);
		if (body)
			memcpy(body, l->text[om], n);
	}
	pthread_mutex_unlock(&l->lock);
	if (!body)
		return plain(c, MHD_HTTP_SERVICE_UNAVAILABLE, "the tracer is busy; try again\n");
	{
		struct MHD_Response *r = MHD_create_response_from_buffer(
			head ? 0 : n, body, head ? MHD_RESPMEM_PERSISTENT : MHD_RESPMEM_MUST_FREE);

		if (!r) {
			free(body);
			return MHD_NO;
		}
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, om ? CT_OM : CT_TEXT);
		ret = MHD_queue_response(c, MHD_HTTP_OK, r);
		MHD_destroy_response(r);
		if (head)
			free(body);
	}
	return ret;
}

/* "HOST:PORT", ":PORT" (loopback), "[V6]:PORT"; the port may be 0 (any free one). */
static int parse_where(const char *spec, struct sockaddr_storage *ss, socklen_t *sl, char *err,
		       size_t errlen)
{
	char host[256];
	const char *colon = strrchr(spec, ':'), *port;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV | AI_PASSIVE },
			*ai = NULL;
	size_t hl;
	int rc;

	if (!colon || !colon[1]) {
		snprintf(err, errlen, "--listen '%s': expected HOST:PORT (127.0.0.1:9464, :9464)",
			 spec);
		return -EINVAL;
	}
	port = colon + 1;
	hl = (size_t)(colon - spec);
	if (hl >= 2 && spec[0] == '[' && spec[hl - 1] == ']') {
		spec++;
		hl -= 2;
	}
	if (hl >= sizeof(host)) {
		snprintf(err, errlen, "--listen: host name too long");
		return -EINVAL;
	}
	memcpy(host, spec, hl);
	host[hl] = '\0';
	if (strspn(port, "0123456789") != strlen(port) || strlen(port) > 5 || atoi(port) > 65535) {
		snprintf(err, errlen, "--listen: '%s' is not a port number (0-65535)", port);
		return -EINVAL;
	}
	rc = getaddrinfo(hl ? host : "127.0.0.1", port, &hints, &ai);
	if (rc || !ai) {
		snprintf(err, errlen, "--listen: cannot resolve '%s': %s", host, gai_strerror(rc));
		return -EINVAL;
	}
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	*sl = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

int cli_listen_start(const char *spec, unsigned max_series, bool signal_main,
		     struct cli_listen **out, char *err, size_t errlen)
{
	struct cli_listen *l = calloc(1, sizeof(*l));
	struct sockaddr_storage ss;
	sigset_t all, old;
	socklen_t sl = 0;
	const union MHD_DaemonInfo *di;
	char addr[INET6_ADDRSTRLEN] = "?";
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO;
	int rc;

	if (!l)
		return -ENOMEM;
	rc = parse_where(spec, &ss, &sl, err, errlen);
	if (rc) {
		free(l);
		return rc;
	}
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	l->main = pthread_self();
	l->signal_main = signal_main;
	l->max_series = max_series;
	l->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (l->efd < 0) {
		snprintf(err, errlen, "--listen: eventfd: %s", strerror(errno));
		free(l);
		return -errno;
	}
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->done, NULL);
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old); /* the server's thread takes no signal */
	l->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, l, MHD_OPTION_SOCK_ADDR,
				(struct sockaddr *)&ss, MHD_OPTION_CONNECTION_TIMEOUT,
				(unsigned)CONN_TIMEOUT_S, MHD_OPTION_CONNECTION_LIMIT,
				(unsigned)CONN_LIMIT, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
				(size_t)CONN_MEMORY, MHD_OPTION_END);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!l->d) {
		snprintf(err, errlen, "--listen %s: cannot serve there (%s)", spec,
			 errno ? strerror(errno) : "address in use or not ours");
		pthread_mutex_destroy(&l->lock);
		pthread_cond_destroy(&l->done);
		close(l->efd);
		free(l);
		return -EADDRINUSE;
	}
	di = MHD_get_daemon_info(l->d, MHD_DAEMON_INFO_BIND_PORT);
	if (ss.ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, addr, sizeof(addr));
	else
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, addr, sizeof(addr));
	snprintf(l->where, sizeof(l->where), ss.ss_family == AF_INET6 ? "[%s]:%u" : "%s:%u", addr,
		 di ? (unsigned)di->port : 0);
	*out = l;
	return 0;
}

const char *cli_listen_where(const struct cli_listen *l)
{
	return l->where;
}

int cli_listen_fd(const struct cli_listen *l)
{
	return l->efd;
}

bool cli_listen_due(struct cli_listen *l)
{
	bool due;

	pthread_mutex_lock(&l->lock);
	due = l->want != 0;
	pthread_mutex_unlock(&l->lock);
	return due;
}

void cli_listen_serve_with(struct cli_listen *l,
			   int (*render)(void *arg, FILE *f, bool om, unsigned max_series), void *arg)
{
	unsigned want;
	eventfd_t ticks;

	pthread_mutex_lock(&l->lock);
	want = l->want;
	l->want = 0;
	if (eventfd_read(l->efd, &ticks)) {
		/* EAGAIN: nothing was counted */
	}
	pthread_mutex_unlock(&l->lock);
	for (unsigned om = 0; om < 2; om++) {
		char *buf = NULL;
		size_t n = 0;
		FILE *f;

		if (!(want & (1u << om)))
			continue;
		f = open_memstream(&buf, &n);
		if (!f)
			continue;
		if (render(arg, f, om, l->max_series)) {
			fclose(f);
			free(buf);
			continue;
		}
		fclose(f);
		pthread_mutex_lock(&l->lock);
		free(l->text[om]);
		l->text[om] = buf;
		l->len[om] = n;
		l->gen[om]++;
		pthread_cond_broadcast(&l->done);
		pthread_mutex_unlock(&l->lock);
	}
}

static int render_session(void *arg, FILE *f, bool om, unsigned max_series)
{
	return up_trace_print_metrics(arg, f, om, max_series);
}

void cli_listen_serve(struct cli_listen *l, struct up_trace *tr)
{
	cli_listen_serve_with(l, render_session, tr);
}

void cli_listen_stop(struct cli_listen *l)
{
	if (!l)
		return;
	MHD_stop_daemon(l->d);
	pthread_mutex_destroy(&l->lock);
	pthread_cond_destroy(&l->done);
	close(l->efd);
	free(l->text[0]);
	free(l->text[1]);
	free(l);
}
