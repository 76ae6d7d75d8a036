/*
 * test_socket_owner.c: every client path refuses an ipc:// socket that
 * another user owns, since whoever created the path first would receive
 * the frames: the library whatever the URL's origin (the default path,
 * $FRAMEPREP_SOCKET, a URL passed in), the CLI and the bench (their paths
 * given as arguments), and a socket file owned by root whose listening
 * process runs as another user (the peer check). Nothing reaches the
 * listener. A socket of one more user is dialled when the caller names
 * that user (fprep_client_open_trusting, $FRAMEPREP_TRUST_SOCKET_OWNER,
 * --trust-socket-owner).
 *
 * Usage: test_socket_owner [CLI BENCH]. Needs root to give the socket file
 * away; exits 77 (skipped) otherwise. "test_socket_owner --listen-as UID
 * PATH" is the peer check's listener, run as another process.
 */
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
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

/* check_refused checks that an open failed with FPREP_EPERM, naming the
 * path and its owner. */
static void check_refused(const char *what, int err, fprep_client *c,
                          const char *path)
{
	const char *msg = fprep_client_last_error(NULL);
	char line[256];

	printf("%s: %s: %s\n", what, fprep_err_name(err), msg);
	snprintf(line, sizeof(line), "%s: dialled", what);
	check(err == FPREP_EPERM && c == NULL, line);
	snprintf(line, sizeof(line), "%s: the error names no path", what);
	check(strstr(msg, path) != NULL, line);
	snprintf(line, sizeof(line), "%s: the error names no owner", what);
	check(strstr(msg, "nobody") != NULL && strstr(msg, "uid") != NULL,
	      line);
}

/* check_tool runs a tool's command line, which must exit with status
 * want and say that the socket is owned by nobody. */
static void check_tool(const char *what, const char *cmd, int want)
{
	char out[4096], line[512];
	size_t n;
	FILE *f = popen(cmd, "r");
	int st;

	check(f != NULL, "popen");
	if (f == NULL)
		return;
	n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = '\0';
	st = pclose(f);
	printf("%s: exit %d: %s", what, WIFEXITED(st) ? WEXITSTATUS(st) : -1,
	       out);
	snprintf(line, sizeof(line), "%s: exit status not %d", what, want);
	check(WIFEXITED(st) && WEXITSTATUS(st) == want, line);
	snprintf(line, sizeof(line), "%s: no word of the owner", what);
	check(strstr(out, "owned by nobody") != NULL, line);
}

/* check_nothing_received checks that no request reached sock. */
static void check_nothing_received(nng_socket sock, const char *what)
{
	nng_msg *msg;
	int rv = nng_recvmsg(sock, &msg, NNG_FLAG_NONBLOCK);

	if (rv == 0)
		nng_msg_free(msg);
	check(rv == NNG_EAGAIN, what);
}

/* listen_as is the peer check's listener: it becomes uid, listens at
 * path and waits 3 s for a request. Exit 0 when none came. */
static int listen_as(const char *uid, const char *path)
{
	char url[160];
	nng_socket sock;
	nng_msg *msg;
	int rv;

	if (setgid(65534) != 0 || setuid((uid_t)atoi(uid)) != 0) {
		perror("setuid");
		return 2;
	}
	snprintf(url, sizeof(url), "ipc://%s", path);
	if (nng_rep0_open(&sock) != 0 || nng_listen(sock, url, NULL, 0) != 0 ||
	    nng_socket_set_ms(sock, NNG_OPT_RECVTIMEO, 3000) != 0)
		return 2;
	rv = nng_recvmsg(sock, &msg, 0);
	if (rv == 0) {
		fprintf(stderr, "the listener of another user got %zu bytes\n",
		        nng_msg_len(msg));
		return 1;
	}
	nng_close(sock);
	return 0;
}

/* check_peer runs a listener as nobody on a socket file then given to
 * root: the file's owner is trusted, its peer is not, so no request may
 * reach it. */
static void check_peer(const char *dir, uid_t nobody)
{
	char path[160], url[192], uid[16];
	struct timespec tick = {0, 10000000};
	fprep_client *c = NULL;
	fprep_result res;
	struct stat st;
	pid_t pid;
	int err, status, i;

	snprintf(path, sizeof(path), "%s/peer.sock", dir);
	snprintf(url, sizeof(url), "ipc://%s", path);
	snprintf(uid, sizeof(uid), "%u", (unsigned)nobody);
	check(chmod(dir, 0777) == 0, "chmod the socket's directory");
	pid = fork();
	if (pid == 0) {
		execl("/proc/self/exe", "test_socket_owner", "--listen-as", uid,
		      path, (char *)NULL);
		_exit(2);
	}
	for (i = 0; i < 300 && stat(path, &st) != 0; i++)
		nanosleep(&tick, NULL);
	check(chown(path, 0, 0) == 0, "chown the peer's socket to root");
	err = fprep_client_open(&c, url, 1000);
	if (err == FPREP_OK) {
		err = fprep_client_info(c, &res);
		if (err == FPREP_OK)
			fprep_result_fini(&res);
		fprep_client_close(c);
	}
	printf("root's socket file, listener of nobody: %s\n",
	       fprep_err_name(err));
	check(err != FPREP_OK, "a peer of another user answered");
	check(waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	              WEXITSTATUS(status) == 0,
	      "the peer of another user received a request");
	unlink(path);
}

int main(int argc, char **argv)
{
	char dir[] = "/tmp/fprep-owner-XXXXXX", path[128], url[160];
	char cmd[1024], buf[256], uid[16];
	struct passwd *pw;
	uid_t nobody = 65534;
	fprep_client *c = NULL;
	nng_socket sock;
	int err;

	if (argc == 4 && strcmp(argv[1], "--listen-as") == 0)
		return listen_as(argv[2], argv[3]);
	if (geteuid() != 0) {
		printf("skipped: giving a socket file to another user needs "
		       "root\n");
		return SKIP;
	}
	if ((pw = getpwnam("nobody")) != NULL)
		nobody = pw->pw_uid;
	snprintf(uid, sizeof(uid), "%u", (unsigned)nobody);
	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	unsetenv(FPREP_TRUST_SOCKET_OWNER_ENV);
	unsetenv(FPREP_SOCKET_ENV);
	setenv("XDG_RUNTIME_DIR", dir, 1);
	snprintf(path, sizeof(path), "%s/frameprep.sock", dir);
	snprintf(url, sizeof(url), "ipc://%s", path);
	if (nng_rep0_open(&sock) != 0 || nng_listen(sock, url, NULL, 0) != 0) {
		fprintf(stderr, "cannot listen on %s\n", url);
		return 1;
	}
	if (chown(path, nobody, 65534) != 0) {
		perror("chown");
		return 1;
	}

	/* The library, whatever the URL's origin. */
	err = fprep_client_open(&c, NULL, 1000);
	check_refused("default socket owned by nobody", err, c, path);
	err = fprep_client_open(&c, url, 1000);
	check_refused("the same socket named explicitly", err, c, path);
	setenv(FPREP_SOCKET_ENV, url, 1);
	setenv("XDG_RUNTIME_DIR", "/nonexistent", 1);
	check(fprep_default_url(buf, sizeof(buf)) == 0 && strcmp(buf, url) == 0,
	      "fprep_default_url does not give $FRAMEPREP_SOCKET");
	err = fprep_client_open(&c, NULL, 1000);
	check_refused("the same socket from $FRAMEPREP_SOCKET", err, c, path);
	snprintf(buf, sizeof(buf), "ipc:///nonexistent.sock,%s", url);
	err = fprep_client_open(&c, buf, 1000);
	check_refused("the same socket in a list", err, c, path);

	/* The tools, with a URL, and with $FRAMEPREP_SOCKET. */
	if (argc == 3) {
		snprintf(cmd, sizeof(cmd), "'%s' info --socket '%s' 2>&1",
		         argv[1], url);
		check_tool("frameprep info --socket", cmd, 3);
		snprintf(cmd, sizeof(cmd), "'%s' info 2>&1", argv[1]);
		check_tool("frameprep info, $FRAMEPREP_SOCKET", cmd, 3);
		snprintf(cmd, sizeof(cmd),
		         "'%s' -n 1 -c 1 --synthetic 64x64 --no-ceiling -q "
		         "--socket '%s' 2>&1",
		         argv[2], url);
		check_tool("frameprep-bench --socket", cmd, 2);
		snprintf(cmd, sizeof(cmd),
		         "'%s' -n 1 -c 1 --synthetic 64x64 --no-ceiling -q "
		         "2>&1",
		         argv[2]);
		check_tool("frameprep-bench, $FRAMEPREP_SOCKET", cmd, 2);
	} else {
		printf("(the tools' paths not given: not run)\n");
	}
	check_nothing_received(sock, "a refused client sent a request");

	/* Named on purpose: dialled. */
	err = fprep_client_open_trusting(&c, url, 1000, "nobody");
	printf("trusting nobody by name: %s\n", fprep_err_name(err));
	check(err == FPREP_OK, "a socket of the trusted user was refused");
	fprep_client_close(c);
	c = NULL;
	err = fprep_client_open_trusting(&c, url, 1000, uid);
	printf("trusting nobody by uid: %s\n", fprep_err_name(err));
	check(err == FPREP_OK, "a socket of the trusted uid was refused");
	fprep_client_close(c);
	c = NULL;
	setenv(FPREP_TRUST_SOCKET_OWNER_ENV, "nobody", 1);
	err = fprep_client_open(&c, NULL, 1000);
	printf("$FRAMEPREP_TRUST_SOCKET_OWNER=nobody: %s\n",
	       fprep_err_name(err));
	check(err == FPREP_OK, "a socket of the user named in the "
	                       "environment was refused");
	fprep_client_close(c);
	c = NULL;
	unsetenv(FPREP_TRUST_SOCKET_OWNER_ENV);
	err = fprep_client_open_trusting(&c, url, 1000, "no-such-user-fprep");
	printf("trusting a user that does not exist: %s: %s\n",
	       fprep_err_name(err), fprep_client_last_error(NULL));
	check(err == FPREP_EINVAL && c == NULL, "an unknown user was trusted");
	if (argc == 3) {
		FILE *f;
		size_t n;

		snprintf(cmd, sizeof(cmd),
		         "'%s' info --trust-socket-owner nobody --socket '%s' "
		         "--timeout 300 2>&1",
		         argv[1], url);
		f = popen(cmd, "r");
		n = f != NULL ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
		buf[n] = '\0';
		/* Dialled: this listener never answers the INFO. */
		printf("frameprep info --trust-socket-owner nobody: %s", buf);
		check(f != NULL && strstr(buf, "refusing") == NULL &&
		              strstr(buf, "ETIMEDOUT") != NULL,
		      "the CLI trusting nobody did not dial");
		if (f != NULL)
			pclose(f);
	}

	check(chown(path, 0, 0) == 0, "chown back to root");
	err = fprep_client_open(&c, NULL, 1000);
	printf("socket owned by root: %s\n", fprep_err_name(err));
	check(err == FPREP_OK, "a socket owned by root was refused");
	fprep_client_close(c);
	c = NULL;
	nng_close(sock);
	unlink(path);

	check_peer(dir, nobody);
	rmdir(dir);
	/* nng frees closed sockets and pipes on its own threads: wait for
	 * them, so the leak check at exit sees only what the test kept. */
	nng_fini();
	if (!failed)
		printf("ok\n");
	return failed;
}
