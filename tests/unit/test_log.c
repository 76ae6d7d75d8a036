/*
 * test_log.c: the log records (src/util/log.h): their prefix with and
 * without the journal, and the rate limit per call site. stderr is sent
 * to a temporary file, read back after each case; the journal's case runs
 * in a child, since whether stderr is the journal is found once.
 */
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"

static FILE *log_file;
static int saved_stderr = -1; /* the test's own stderr, for cmocka */

/* capture_start sends stderr to a new temporary file. */
static void capture_start(void)
{
	log_file = tmpfile();
	assert_non_null(log_file);
	assert_int_not_equal(dup2(fileno(log_file), STDERR_FILENO), -1);
}

/* capture_lines reads what was logged since capture_start: its lines into
 * lines (each a malloc'd string), their number returned. */
static int capture_lines(char **lines, int max)
{
	char buf[2048];
	int n = 0;

	dup2(saved_stderr, STDERR_FILENO);
	rewind(log_file);
	while (fgets(buf, sizeof(buf), log_file) != NULL) {
		assert_true(n < max);
		lines[n++] = strdup(buf);
	}
	fclose(log_file);
	log_file = NULL;
	return n;
}

static void free_lines(char **lines, int n)
{
	for (int i = 0; i < n; i++)
		free(lines[i]);
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

static void test_timestamp_outside_journal(void **state)
{
	regex_t re;
	char *lines[8];
	int n;

	(void)state;
	unsetenv("JOURNAL_STREAM");
	capture_start();
	fprep__log(FPREP_LOG_NOTICE, "hello %d", 42);
	n = capture_lines(lines, 8);
	assert_int_equal(n, 1);
	assert_int_equal(
	        regcomp(&re,
	                "^20[0-9][0-9]-[01][0-9]-[0-3][0-9]T[0-2][0-9]:"
	                "[0-5][0-9]:[0-6][0-9]\\.[0-9]{3}Z notice: "
	                "hello 42\n$",
	                REG_EXTENDED | REG_NOSUB),
	        0);
	assert_int_equal(regexec(&re, lines[0], 0, NULL, 0), 0);
	regfree(&re);
	free_lines(lines, n);
}

/* In a child: JOURNAL_STREAM names the file stderr goes to, so records
 * carry the syslog priority and no time; a JOURNAL_STREAM that names
 * another file does not count. */
static void test_journal_prefix(void **state)
{
	char *lines[8], env[64];
	struct stat st;
	int n, status;
	pid_t pid;

	(void)state;
	for (int same = 0; same < 2; same++) {
		capture_start();
		assert_int_equal(fstat(STDERR_FILENO, &st), 0);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			snprintf(env, sizeof(env), "%llu:%llu",
			         (unsigned long long)st.st_dev,
			         (unsigned long long)st.st_ino +
			                 (same ? 0 : 1));
			setenv("JOURNAL_STREAM", env, 1);
			fprep__log(FPREP_LOG_WARNING, "to the journal");
			_exit(0);
		}
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		n = capture_lines(lines, 8);
		assert_int_equal(n, 1);
		if (same)
			assert_string_equal(lines[0], "<4>to the journal\n");
		else
			assert_non_null(strstr(lines[0],
			                       "Z warning: to the journal\n"));
		free_lines(lines, n);
	}
}

/* 3,000 records of one call site in a burst: 10 written, then one line
 * with the count and the last record once the window has passed; another
 * call site and debug records are not held back by the flood. */
static void test_rate_limit(void **state)
{
	char *lines[64];
	int n;

	(void)state;
	unsetenv("JOURNAL_STREAM");
	fprep__log_set_level(FPREP_LOG_DEBUG);
	fprep__log_set_rate(10, 300);
	capture_start();
	for (int i = 0; i < 3000; i++) {
		fprep__log(FPREP_LOG_INFO, "request %d: EINVAL: bad", i);
		if (i % 1000 == 0)
			fprep__log(FPREP_LOG_NOTICE, "another site %d", i);
		if (i < 20)
			fprep__log(FPREP_LOG_DEBUG, "debug %d", i);
	}
	sleep_ms(400);
	fprep__log(FPREP_LOG_INFO, "request %d: EINVAL: bad", 3000);
	n = capture_lines(lines, 64);
	/* 10 + 3 other + 20 debug + the count + the new window's first. */
	assert_int_equal(n, 10 + 3 + 20 + 1 + 1);
	assert_non_null(strstr(lines[0], "info: request 0: EINVAL"));
	assert_non_null(strstr(lines[n - 2],
	                       "info: request 2999: EINVAL: bad (the last of "
	                       "2990 lines like it suppressed in 0.3 s)\n"));
	assert_non_null(strstr(lines[n - 1], "info: request 3000: EINVAL"));
	free_lines(lines, n);

	/* A count still held when the process ends is flushed. */
	capture_start();
	for (int i = 0; i < 15; i++)
		fprep__log(FPREP_LOG_WARNING, "again %d", i);
	fprep__log_flush();
	n = capture_lines(lines, 64);
	assert_int_equal(n, 11);
	assert_non_null(strstr(lines[10],
	                       "warning: again 14 (the last of 5 "
	                       "lines like it suppressed in 0.0 s)"));
	free_lines(lines, n);

	/* burst 0: no limit. */
	fprep__log_set_rate(0, 300);
	capture_start();
	for (int i = 0; i < 50; i++)
		fprep__log(FPREP_LOG_INFO, "unlimited %d", i);
	n = capture_lines(lines, 64);
	assert_int_equal(n, 50);
	free_lines(lines, n);
	fprep__log_set_rate(FPREP__LOG_BURST, FPREP__LOG_INTERVAL_MS);
}

static void test_level(void **state)
{
	char *lines[8];
	int n;

	(void)state;
	fprep__log_set_level(FPREP_LOG_NOTICE);
	capture_start();
	fprep__log(FPREP_LOG_INFO, "dropped");
	fprep__log(FPREP_LOG_ERR, "kept");
	n = capture_lines(lines, 8);
	assert_int_equal(n, 1);
	assert_non_null(strstr(lines[0], "err: kept\n"));
	free_lines(lines, n);
	assert_int_equal(fprep__log_parse_level("warning"), FPREP_LOG_WARNING);
	assert_int_equal(fprep__log_parse_level("loud"), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_journal_prefix),
	        cmocka_unit_test(test_timestamp_outside_journal),
	        cmocka_unit_test(test_rate_limit),
	        cmocka_unit_test(test_level),
	};
	saved_stderr = dup(STDERR_FILENO);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
