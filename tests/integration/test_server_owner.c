/*
 * test_server_owner.c: another user who creates frameprepd's ipc path first
 * (issue 30, D14). In a sticky directory, as /tmp is, a user (uid 65534)
 * leaves at the path a plain file, a stale socket, or a socket it listens
 * on; a daemon running as another user (uid 65533) cannot replace any of
 * them. It must not start, and say why: the path and its owner, instead of
 * "address in use". A stale socket of the daemon's own user in the same
 * directory is removed and the daemon serves (the packaged unit's
 * /run/frameprep/ is the service user's alone, so it never meets this).
 * Needs root to create files as another user and to run the daemon as one:
 * skipped (77) otherwise.
 *
 * Usage: test_server_owner FRAMEPREPD
 */
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#define SQUATTER 65534u /* owns what lies at the path */
#define DAEMON   65533u /* runs the daemon */

static char dir[] = "/tmp/fprep-owner-XXXXXX";

/* unix_socket binds a socket at path (listening when listen_too) and
 * returns it; closing it leaves the file, a stale socket. */
static int unix_socket(const char *path, int listen_too)
{
	struct sockaddr_un a;
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	REQUIRE(fd >= 0);
	memset(&a, 0, sizeof(a));
	a.sun_family = AF_UNIX;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	REQUIRE(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	if (listen_too)
		REQUIRE(listen(fd, 8) == 0);
	return fd;
}

/* run_daemon runs frameprepd as DAEMON on ipc://path for at most 5 s
 * (SIGTERM after 3 s if it started), its output into log; returns its
 * exit status, 128 + signal when killed. */
static int run_daemon(const char *exe, const char *path, const char *log)
{
	char url[256];
	int st, fd;
	pid_t pid;

	snprintf(url, sizeof(url), "ipc://%s", path);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(126);
		if (setgroups(0, NULL) != 0 || setgid(DAEMON) != 0 ||
		    setuid(DAEMON) != 0)
			_exit(126);
		execl(exe, exe, "--device", "cpu", "--listen", url,
		      "--log-level", "info", (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 300; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st)
			                     : 128 + WTERMSIG(st);
		if (i == 150)
			kill(pid, SIGTERM);
		usleep(20000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return 128 + SIGKILL;
}

/* log_has tells whether the file log contains text. */
static int log_has(const char *log, const char *text)
{
	char buf[16384];
	FILE *f = fopen(log, "r");
	size_t n;

	if (f == NULL)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return strstr(buf, text) != NULL;
}

/* refused runs the daemon on path, owned by SQUATTER, and checks that it
 * exits with an error naming the path and its owner. */
static void refused(const char *exe, const char *path, const char *what)
{
	char log[256];
	int status;

	REQUIRE(lchown(path, SQUATTER, SQUATTER) == 0);
	snprintf(log, sizeof(log), "%s/daemon.log", dir);
	status = run_daemon(exe, path, log);
	printf("%s of uid %u: daemon exit status %d\n", what, SQUATTER, status);
	CHECK(status == 1, "%s: daemon exit status %d, not 1", what, status);
	CHECK(log_has(log, path), "%s: the log does not name %s", what, path);
	CHECK(log_has(log, "uid 65534"), "%s: the log does not name the owner",
	      what);
	CHECK(!log_has(log, "address in use (NNG_EADDRINUSE)"),
	      "%s: still only \"address in use\"", what);
	unlink(log);
}

int main(int argc, char **argv)
{
	char path[256], log[256];
	int fd, status;

	if (argc != 2) {
		fprintf(stderr, "usage: %s FRAMEPREPD\n", argv[0]);
		return 2;
	}
	if (geteuid() != 0) {
		printf("not root: cannot act as two other users: skipped\n");
		return 77;
	}
	REQUIRE(mkdtemp(dir) != NULL);
	REQUIRE(chmod(dir, 01777) == 0); /* sticky, as /tmp */
	snprintf(path, sizeof(path), "%s/s.sock", dir);

	/* A plain file. */
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
	REQUIRE(fd >= 0);
	close(fd);
	refused(argv[1], path, "a plain file");
	REQUIRE(unlink(path) == 0);

	/* A stale socket: nobody listens, but it is not the daemon's to
	 * remove in a sticky directory. */
	close(unix_socket(path, 0));
	refused(argv[1], path, "a stale socket");
	REQUIRE(unlink(path) == 0);

	/* A socket someone listens on. */
	fd = unix_socket(path, 1);
	refused(argv[1], path, "a listening socket");
	close(fd);
	REQUIRE(unlink(path) == 0);

	/* The daemon's own user's stale socket goes, and it serves. */
	close(unix_socket(path, 0));
	REQUIRE(lchown(path, DAEMON, DAEMON) == 0);
	snprintf(log, sizeof(log), "%s/daemon.log", dir);
	status = run_daemon(argv[1], path, log);
	printf("its own user's stale socket: daemon exit status %d\n", status);
	CHECK(status == 0, "own stale socket: exit status %d, not 0", status);
	CHECK(log_has(log, "removed the stale socket file"),
	      "own stale socket: not removed");
	unlink(log);
	unlink(path);
	rmdir(dir);
	return check_failures ? 1 : 0;
}
