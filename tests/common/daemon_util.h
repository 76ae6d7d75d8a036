/*
 * daemon_util.h: start and stop a real frameprepd from a test program, and
 * check that it still serves. Header-only, for the test programs that
 * drive a daemon through the public client API.
 */
#ifndef FPREP_TESTS_DAEMON_UTIL_H
#define FPREP_TESTS_DAEMON_UTIL_H

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "frameprep/frameprep.h"

static inline void daemon_sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}

/* daemon_args ends the program with status 2 and a usage line naming
 * args (what the program takes, "FRAMEPREPD ...") unless it was given
 * want - 1 arguments (argc == want). */
static inline void daemon_args(int argc, char **argv, int want,
                               const char *args)
{
	if (argc != want) {
		fprintf(stderr, "usage: %s %s\n", argv[0], args);
		exit(2);
	}
}

/* daemon_socket writes a socket path of the test's own,
 * /tmp/fprep-TAG-PID.sock, into sock (sock_size bytes) and its URL,
 * ipc://PATH, into url (url_size bytes). */
static inline void daemon_socket(char *sock, size_t sock_size, char *url,
                                 size_t url_size, const char *tag)
{
	snprintf(sock, sock_size, "/tmp/fprep-%s-%ld.sock", tag,
	         (long)getpid());
	snprintf(url, url_size, "ipc://%s", sock);
}

/* daemon_client opens a client on u or ends the program. */
static inline fprep_client *daemon_client(const char *u)
{
	fprep_client *c = NULL;

	if (fprep_client_open(&c, u, 30000) != 0) {
		fprintf(stderr, "FAIL connect %s: %s\n", u,
		        fprep_client_last_error(NULL));
		exit(1);
	}
	return c;
}

/* daemon_answers waits up to 30 s until a daemon answers on u; returns
 * 1 when it does. */
static inline int daemon_answers(const char *u)
{
	for (int i = 0; i < 1200; i++) {
		fprep_client *c = NULL;
		if (fprep_client_open(&c, u, 1000) == 0) {
			fprep_client_close(c);
			return 1;
		}
		daemon_sleep_ms(25);
	}
	return 0;
}

/* daemon_start runs exe --device device --listen u --log-level info and
 * the extra arguments (NULL-terminated, may be NULL), and waits until it
 * answers on u and on every other --listen URL of extra (the daemon opens
 * its listeners one after the other). The daemon dies with the test
 * program (PR_SET_PDEATHSIG), so a test that ends early leaves no daemon
 * holding its output open. Returns its pid; ends the program when it does
 * not start. */
static inline pid_t daemon_start(const char *exe, const char *device,
                                 const char *u, char *const extra[])
{
	char *argv[24] = {(char *)exe, "--device", (char *)device,
	                  "--listen",  (char *)u,  "--log-level",
	                  "info"};
	int n = 7;
	pid_t pid;

	for (int i = 0; extra != NULL && extra[i] != NULL && n < 23; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	pid_t parent = getpid();
	pid = fork();
	if (pid == 0) {
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 ||
		    getppid() != parent)
			_exit(127);
		execv(exe, argv);
		_exit(127);
	}
	const char *wait_for = u;
	for (int i = 0; wait_for != NULL;) {
		if (!daemon_answers(wait_for)) {
			fprintf(stderr, "FAIL frameprepd did not start on %s\n",
			        wait_for);
			kill(pid, SIGKILL);
			exit(1);
		}
		wait_for = NULL;
		for (; extra != NULL && extra[i] != NULL && wait_for == NULL;
		     i++)
			if (strcmp(extra[i], "--listen") == 0 &&
			    extra[i + 1] != NULL)
				wait_for = extra[++i];
	}
	return pid;
}

/* daemon_stop sends SIGTERM and returns the exit status (128 + signal when
 * killed), or -1. */
static inline int daemon_stop(pid_t pid)
{
	int st;

	kill(pid, SIGTERM);
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* daemon_pause stops the daemon pid (a child of this program) with SIGSTOP
 * and returns once every one of its threads has stopped: kill() returns
 * when the signal is queued, and until the group stop completes the
 * daemon's threads may still take connections and answer. Returns 0, or
 * -1 when the daemon is not a stopped child of ours. daemon_resume
 * continues it. */
static inline int daemon_pause(pid_t pid)
{
	int st;

	if (kill(pid, SIGSTOP) != 0)
		return -1;
	for (;;) {
		pid_t r = waitpid(pid, &st, WUNTRACED);
		if (r == pid && WIFSTOPPED(st))
			return 0;
		if (r == -1 && errno == EINTR)
			continue;
		return -1;
	}
}

static inline int daemon_resume(pid_t pid)
{
	return kill(pid, SIGCONT);
}

/* daemon_serves checks that the daemon on u still answers an inline
 * frame; why names what came before, for the failure message. */
static inline void daemon_serves(const char *u, const char *why)
{
	static uint8_t px[64 * 48 * 3];
	fprep_client *c = daemon_client(u);
	fprep_request req;
	fprep_result res;
	int err;

	for (size_t i = 0; i < sizeof(px); i++)
		px[i] = (uint8_t)(i * 7);
	fprep_request_init(&req, FPREP_PIX_BGR8, 64, 48);
	req.out_width = req.out_height = 32;
	err = fprep_client_request(c, &req, px, &res);
	CHECK(err == 0 && res.header.status == 0,
	      "daemon no longer serves after %s: %s", why,
	      err ? fprep_client_last_error(c) : res.header.message);
	if (err == 0)
		fprep_result_fini(&res);
	fprep_client_close(c);
}

/* daemon_info_value copies the value of INFO's "key: value" line into
 * buf; returns 0, or -1 when the key is missing. */
static inline int daemon_info_value(fprep_client *c, const char *key, char *buf,
                                    size_t size)
{
	fprep_result res;
	const char *p, *text;
	size_t klen = strlen(key), n;
	int rv = -1;

	if (fprep_client_info(c, &res) != 0)
		return -1;
	text = res.payload;
	for (p = text; p != NULL && *p != '\0';) {
		if (strncmp(p, key, klen) == 0 && p[klen] == ':' &&
		    p[klen + 1] == ' ') {
			p += klen + 2;
			n = strcspn(p, "\n");
			if (n >= size)
				n = size - 1;
			memcpy(buf, p, n);
			buf[n] = '\0';
			rv = 0;
			break;
		}
		p = strchr(p, '\n');
		if (p != NULL)
			p++;
	}
	fprep_result_fini(&res);
	return rv;
}

#endif /* FPREP_TESTS_DAEMON_UTIL_H */
