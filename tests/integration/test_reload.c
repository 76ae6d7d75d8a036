/*
 * test_reload.c: SIGHUP reloads frameprepd's settings file, against a real
 * daemon (CPU backend) started with --config, through one connection and
 * one shared-memory ring (fprep_ring) kept open across every reload:
 *
 *   reload       the file rewritten with a lower max-width, another
 *                log-level and another max-regions (not live); SIGHUP;
 *                the log names the live changes and, in one line, the
 *                setting kept; INFO shows the new max_width; the same
 *                ring serves a narrow frame, and a frame wider than the
 *                new bound is refused with ELIMIT naming it
 *   broken file  a value out of bounds: SIGHUP is refused with the
 *                parser's message, the limits stay, the ring still serves
 *   flags win    a flag given at start (--max-height) keeps its value
 *                over the file's on reload
 *   under load   SIGHUPs every few milliseconds (max-width and log-level
 *                alternating) while the ring keeps both slots in flight
 *                and other connections come and go (logged on nng's
 *                threads): every frame is served (under TSan: no race reported,
 * the daemon's exit status would say so)
 *
 * Usage: test_reload FRAMEPREPD
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "daemon_util.h"
#include "frameprep/frameprep.h"
#include "frameprep/ring.h"

#define SLOTS 2
#define WIDE  640 /* the frame wider than the reloaded max-width */
#define NEW_W 512 /* the reloaded max-width */

static char dir[] = "/tmp/fprep-reload-XXXXXX";
static char conf[256], log_path[256], url[300];

/* write_conf replaces the settings file with text. */
static void write_conf(const char *text)
{
	char tmp[300];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.new", conf);
	f = fopen(tmp, "w");
	REQUIRE(f != NULL);
	fputs(text, f);
	REQUIRE(fclose(f) == 0);
	REQUIRE(rename(tmp, conf) == 0);
}

/* log_text returns the daemon's log so far (malloc'd, terminated). */
static char *log_text(void)
{
	FILE *f = fopen(log_path, "r");
	char *buf;
	long n;

	REQUIRE(f != NULL);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = calloc(1, (size_t)n + 1);
	REQUIRE(buf != NULL);
	n = (long)fread(buf, 1, (size_t)n, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* count_of returns how many times s occurs in text. */
static int count_of(const char *text, const char *s)
{
	int n = 0;

	for (const char *p = text; (p = strstr(p, s)) != NULL; p++)
		n++;
	return n;
}

/* hup sends SIGHUP and waits up to 10 s for the nth "SIGHUP: " answer
 * line (reloaded or refused) in the log; returns the log. */
static char *hup(pid_t pid, int nth)
{
	char *text = NULL;

	REQUIRE(kill(pid, SIGHUP) == 0);
	for (int i = 0; i < 400; i++) {
		free(text);
		text = log_text();
		if (count_of(text, "SIGHUP: reloaded") +
		            count_of(text, "refused, nothing changed") >=
		    nth)
			return text;
		daemon_sleep_ms(25);
	}
	CHECK(0, "no SIGHUP line %d in the log:\n%s", nth, text);
	return text;
}

/* start runs the daemon with --config conf, its stderr into the log. */
static pid_t start(const char *exe)
{
	pid_t parent = getpid(), pid = fork();

	REQUIRE(pid >= 0);
	if (pid == 0) {
		int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (fd < 0 || dup2(fd, 2) < 0 ||
		    prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 ||
		    getppid() != parent)
			_exit(127);
		execl(exe, exe, "--device", "cpu", "--listen", url, "--workers",
		      "2", "--max-height", "1000", "--config", conf,
		      (char *)NULL);
		_exit(127);
	}
	if (!daemon_answers(url)) {
		kill(pid, SIGKILL);
		fprintf(stderr, "FAIL frameprepd did not start\n");
		exit(1);
	}
	return pid;
}

/* ring_frame sends a width x 48 RGB8 frame from slot k of ring and
 * returns the reply's status, its message in msg. */
static int ring_frame(fprep_ring *ring, unsigned k, uint32_t width, char *msg,
                      size_t size)
{
	fprep_request req;
	fprep_pending *p = NULL;
	fprep_result res;
	int err, status;

	fprep_request_init(&req, FPREP_PIX_RGB8, width, 48);
	req.out_width = req.out_height = 64;
	memset(fprep_ring_frame(ring, k), (int)(width & 0xff), req.input_size);
	err = fprep_ring_submit(ring, k, &req, NULL, NULL, &p);
	if (err != 0) {
		snprintf(msg, size, "submit: %s", fprep_strerror(err));
		return -err;
	}
	err = fprep_pending_wait(p, &res);
	if (err != 0) {
		snprintf(msg, size, "wait: %s", fprep_strerror(err));
		return -err;
	}
	status = (int)res.header.status;
	snprintf(msg, size, "%s", res.header.message);
	fprep_result_fini(&res);
	return status;
}

#define LOAD_HUPS   40
#define LOAD_FRAMES 400

static _Atomic int load_done;

/* load_hups rewrites the file and sends SIGHUP, LOAD_HUPS times, a few
 * milliseconds apart, while the main thread sends frames. */
static void *load_hups(void *arg)
{
	pid_t pid = *(pid_t *)arg;

	for (int i = 0; i < LOAD_HUPS && !load_done; i++) {
		write_conf(i % 2 ? "max-width = 600\nlog-level = info\n"
		                 : "max-width = 512\nlog-level = debug\n");
		CHECK(kill(pid, SIGHUP) == 0, "SIGHUP %d", i);
		/* A connection that comes and goes: nng's threads log it,
		 * reading the log level the loop is changing. */
		fprep_client_close(daemon_client(url));
		daemon_sleep_ms(3);
	}
	return NULL;
}

/* load sends LOAD_FRAMES 320-wide frames through both slots of ring, two
 * in flight, while load_hups runs; returns how many were served. */
static int load(fprep_ring *ring, pid_t pid)
{
	fprep_request req[SLOTS];
	fprep_pending *p[SLOTS];
	fprep_result res;
	pthread_t th;
	int served = 0;

	REQUIRE(pthread_create(&th, NULL, load_hups, &pid) == 0);
	for (int i = 0; i < LOAD_FRAMES; i += SLOTS) {
		for (unsigned k = 0; k < SLOTS; k++) {
			fprep_request_init(&req[k], FPREP_PIX_RGB8, 320, 48);
			req[k].out_width = req[k].out_height = 64;
			p[k] = NULL;
			CHECK(fprep_ring_submit(ring, k, &req[k], NULL, NULL,
			                        &p[k]) == 0,
			      "load: submit %d", i);
		}
		for (unsigned k = 0; k < SLOTS; k++) {
			if (p[k] == NULL)
				continue;
			if (fprep_pending_wait(p[k], &res) != 0)
				continue;
			served += res.header.status == 0;
			fprep_result_fini(&res);
		}
	}
	load_done = 1;
	pthread_join(th, NULL);
	return served;
}

/* info_is checks that INFO's key reads want. */
static void info_is(fprep_client *c, const char *key, const char *want,
                    const char *when)
{
	char v[64] = "";

	CHECK(daemon_info_value(c, key, v, sizeof(v)) == 0 &&
	              strcmp(v, want) == 0,
	      "%s: INFO %s is '%s', not %s", when, key, v, want);
}

int main(int argc, char **argv)
{
	fprep_client *c;
	fprep_ring_config cfg = {0};
	fprep_ring *ring;
	char msg[FPREP_MESSAGE_SIZE], want[128], *text;
	uint32_t shape[4];
	uint64_t tensor;
	fprep_request req;
	pid_t pid;
	int st;

	daemon_args(argc, argv, 2, "FRAMEPREPD");
	REQUIRE(mkdtemp(dir) != NULL);
	snprintf(conf, sizeof(conf), "%s/frameprepd.conf", dir);
	snprintf(log_path, sizeof(log_path), "%s/log", dir);
	snprintf(url, sizeof(url), "ipc://%s/s", dir);
	write_conf("[frameprepd]\nmax-width = 8192\nmax-height = 64\n"
	           "log-level = info\nmax-regions = 16\n");
	pid = start(argv[1]);

	c = daemon_client(url);
	fprep_request_init(&req, FPREP_PIX_RGB8, WIDE, 48);
	req.out_width = req.out_height = 64;
	fprep_tensor_shape(&req, shape, &tensor);
	cfg.slots = SLOTS;
	cfg.frame_bytes = req.input_size;
	cfg.tensor_bytes = tensor;
	REQUIRE(fprep_ring_open(&ring, c, &cfg) == 0);
	CHECK((st = ring_frame(ring, 0, WIDE, msg, sizeof(msg))) == 0,
	      "before SIGHUP: a %d-wide frame: status %d: %s", WIDE, st, msg);
	info_is(c, "max_width", "8192", "before SIGHUP");
	info_is(c, "max_height", "1000", "--max-height over the file");

	/* Reload: max-width and log-level live, max-regions kept. */
	write_conf("[frameprepd]\nmax-width = 512\nmax-height = 64\n"
	           "log-level = debug\nmax-regions = 8\n");
	text = hup(pid, 1);
	CHECK(strstr(text, "max-width 8192 -> 512") != NULL &&
	              strstr(text, "log-level info -> debug") != NULL,
	      "the reload's line names the live changes:\n%s", text);
	CHECK(strstr(text, "SIGHUP: kept: max-regions (restart to change)") !=
	              NULL,
	      "the kept setting is named in one line:\n%s", text);
	CHECK(strstr(text, "max-height") == NULL,
	      "--max-height, a flag, still wins over the file:\n%s", text);
	free(text);
	info_is(c, "max_width", "512", "after SIGHUP");
	info_is(c, "max_height", "1000", "after SIGHUP, the flag's");
	info_is(c, "max_regions", "16", "after SIGHUP, kept");
	info_is(c, "regions", "1", "after SIGHUP, the ring's region");
	for (unsigned k = 0; k < SLOTS; k++)
		CHECK((st = ring_frame(ring, k, 320, msg, sizeof(msg))) == 0,
		      "after SIGHUP, the same ring, slot %u: status %d: %s", k,
		      st, msg);
	snprintf(want, sizeof(want), "exceeds max_width %d", NEW_W);
	st = ring_frame(ring, 1, WIDE, msg, sizeof(msg));
	CHECK(st == FPREP_ELIMIT && strstr(msg, want) != NULL,
	      "after SIGHUP: a %d-wide frame: status %d '%s', not ELIMIT "
	      "naming the new bound",
	      WIDE, st, msg);

	/* A broken file changes nothing. */
	write_conf("[frameprepd]\nmax-width = 100000\nlog-level = err\n");
	text = hup(pid, 2);
	CHECK(strstr(text, "refused, nothing changed") != NULL &&
	              strstr(text, "'100000' is not an integer in 1..65535") !=
	                      NULL,
	      "the broken file is refused with the parser's message:\n%s",
	      text);
	free(text);
	info_is(c, "max_width", "512", "after a broken file");
	CHECK((st = ring_frame(ring, 0, 320, msg, sizeof(msg))) == 0,
	      "after a broken file: status %d: %s", st, msg);
	st = ring_frame(ring, 1, WIDE, msg, sizeof(msg));
	CHECK(st == FPREP_ELIMIT && strstr(msg, want) != NULL,
	      "after a broken file: the %d-wide frame: status %d '%s'", WIDE,
	      st, msg);
	/* A directory, an empty file and one that is not text (a NUL
	 * first) are refused with the old settings kept (issue 35): they
	 * reset every live setting to its default before. */
	{
		static const struct {
			const char *what, *bytes, *why;
			size_t len;
		} odd[] = {
		        {"an empty file", "", "is empty", 0},
		        {"a NUL-led file", "\0max-width = 9\n",
		         "not a text file", 14},
		        {"a binary file",
		         "\x7f"
		         "ELF\x02\x01\x01",
		         "not a text file", 7},
		};
		char saved[300];
		int nth = 3;

		for (size_t k = 0; k < sizeof(odd) / sizeof(odd[0]); k++) {
			FILE *f = fopen(conf, "w");

			REQUIRE(f != NULL);
			REQUIRE(fwrite(odd[k].bytes, 1, odd[k].len, f) ==
			        odd[k].len);
			REQUIRE(fclose(f) == 0);
			text = hup(pid, nth++);
			CHECK(strstr(text, odd[k].why) != NULL,
			      "SIGHUP with %s: not refused naming '%s':\n%s",
			      odd[k].what, odd[k].why, text);
			free(text);
			info_is(c, "max_width", "512", odd[k].what);
		}
		snprintf(saved, sizeof(saved), "%s.saved", conf);
		write_conf("[frameprepd]\nmax-width = 512\n");
		REQUIRE(rename(conf, saved) == 0);
		REQUIRE(mkdir(conf, 0700) == 0);
		text = hup(pid, nth++);
		CHECK(strstr(text, "is a directory") != NULL,
		      "SIGHUP with a directory: not refused:\n%s", text);
		free(text);
		info_is(c, "max_width", "512", "a directory");
		REQUIRE(rmdir(conf) == 0);
		REQUIRE(rename(saved, conf) == 0);
	}
	/* Under load. */
	st = load(ring, pid);
	CHECK(st == LOAD_FRAMES, "under SIGHUPs: %d of %d frames served", st,
	      LOAD_FRAMES);
	text = log_text();
	CHECK(count_of(text, "SIGHUP: reloaded") >= 2,
	      "under load: the reloads were logged:\n%s", text);
	free(text);

	text = log_text();
	CHECK(count_of(text, "regions removed") == 0,
	      "no connection closed across the reloads:\n%s", text);
	free(text);

	fprep_ring_close(ring);
	fprep_client_close(c);
	st = daemon_stop(pid);
	CHECK(st == 0, "frameprepd exited with %d", st);
	if (check_failures) {
		fprintf(stderr, "the daemon's log: %s\n", log_path);
	} else {
		unlink(conf);
		unlink(log_path);
		rmdir(dir);
	}
	printf("reload: %d checks, %d failed\n", (int)check_count,
	       (int)check_failures);
	return check_failures ? 1 : 0;
}
