// SPDX-License-Identifier: MIT
/*
 * getaddrinfo("localhost") three times (gethostlatency.bt's workload, tests/run.cmake),
 * and three threads made and joined (threadsnoop.bt's).  Prints nothing.
 */
#include <netdb.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>

static void *thread_fn(void *arg)
{
	return arg;
}

int main(void)
{
	for (int i = 0; i < 3; i++) {
		struct addrinfo hints, *res = NULL;
		pthread_t t;

		memset(&hints, 0, sizeof(hints));
		hints.ai_family = AF_INET;
		if (!getaddrinfo("localhost", NULL, &hints, &res))
			freeaddrinfo(res);
		if (!pthread_create(&t, NULL, thread_fn, NULL))
			pthread_join(t, NULL);
	}
	return 0;
}
