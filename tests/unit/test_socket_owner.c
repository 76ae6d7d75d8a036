/*
 * test_socket_owner.c: the client refuses a default socket (the path
 * fprep_default_url gives, here under $XDG_RUNTIME_DIR) that another user
 * owns, since someone who created the path first would receive the frames;
 * it dials one owned by root or the caller, and a socket named explicitly
 * whoever owns it.
 *
 * Needs root to give the socket file away; exits 77 (skipped) otherwise.
 */
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>

#include "frameprep/frameprep.h"

#define SKIP 77

static int failed;

static void check(int cond, const char *what)
{
	if (!cond) {
		fprintf(stderr, "FAIL: %s\n", what);
		failed = 1;
	}
}

int main(void)
{
	char dir[] = "/tmp/fprep-owner-XXXXXX", path[128], url[160];
	struct passwd *nobody;
	fprep_client *c = NULL;
	nng_socket sock;
	const char *msg;
	int err;

	if (geteuid() != 0) {
		printf("skipped: giving a socket file to another user needs "
		       "root\n");
		return SKIP;
	}
	nobody = getpwnam("nobody");
	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	setenv("XDG_RUNTIME_DIR", dir, 1);
	snprintf(path, sizeof(path), "%s/frameprep.sock", dir);
	snprintf(url, sizeof(url), "ipc://%s", path);
	if (nng_rep0_open(&sock) != 0 || nng_listen(sock, url, NULL, 0) != 0) {
		fprintf(stderr, "cannot listen on %s\n", url);
		return 1;
	}
	if (chown(path, nobody != NULL ? nobody->pw_uid : 65534,
	          nobody != NULL ? nobody->pw_gid : 65534) != 0) {
		perror("chown");
		return 1;
	}
	err = fprep_client_open(&c, NULL, 1000);
	msg = fprep_client_last_error(NULL);
	printf("default socket owned by nobody: %s: %s\n", fprep_err_name(err),
	       msg);
	check(err == FPREP_EPERM, "a socket owned by nobody was dialled");
	check(c == NULL, "client left behind");
	check(strstr(msg, path) != NULL, "the error does not name the path");
	check(strstr(msg, "uid") != NULL, "the error does not name the owner");
	fprep_client_close(c);
	c = NULL;

	err = fprep_client_open(&c, url, 1000);
	printf("the same socket named explicitly: %s\n", fprep_err_name(err));
	check(err == FPREP_OK, "an explicitly named socket was refused");
	fprep_client_close(c);
	c = NULL;

	check(chown(path, 0, 0) == 0, "chown back to root");
	err = fprep_client_open(&c, NULL, 1000);
	printf("default socket owned by root: %s\n", fprep_err_name(err));
	check(err == FPREP_OK, "a socket owned by root was refused");
	fprep_client_close(c);

	nng_close(sock);
	unlink(path);
	rmdir(dir);
	/* nng frees closed sockets and pipes on its own threads: wait for
	 * them, so the leak check at exit sees only what the test kept. */
	nng_fini();
	if (!failed)
		printf("ok\n");
	return failed;
}
