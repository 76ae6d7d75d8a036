/*
 * test_watchdog.c: the shutdown watchdog (service/watchdog.c). Stopped in
 * time it does nothing; never started, stopping it is harmless; expired, it
 * ends the process with status 1, which a forked child shows.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cmocka_main.h"

#include "watchdog.h"

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) != 0)
		;
}

/* Stopped well within its time, repeatedly: the process goes on. */
static void stop_in_time(void **state)
{
	fprep__watchdog wd;

	(void)state;
	memset(&wd, 0, sizeof(wd));
	for (int i = 0; i < 20; i++) {
		assert_int_equal(fprep__watchdog_start(&wd, 60000), 0);
		assert_int_equal(wd.running, 1);
		if (i % 2)
			sleep_ms(5);
		fprep__watchdog_stop(&wd);
		assert_int_equal(wd.running, 0);
		/* A second stop is harmless too. */
		fprep__watchdog_stop(&wd);
	}
}

static void stop_without_start(void **state)
{
	fprep__watchdog wd;

	(void)state;
	memset(&wd, 0, sizeof(wd));
	fprep__watchdog_stop(&wd);
	fprep__watchdog_stop(&wd);
	assert_int_equal(wd.running, 0);
}

/* child_run starts a watchdog of timeout_ms in a child, sleeps sleep_ms,
 * stops it and exits 0; returns the child's wait status. */
static int child_run(int timeout_ms, int sleep_ms_)
{
	int status = 0;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		fprep__watchdog wd;

		memset(&wd, 0, sizeof(wd));
		if (fprep__watchdog_start(&wd, timeout_ms) != 0)
			_exit(3);
		sleep_ms(sleep_ms_);
		fprep__watchdog_stop(&wd);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return status;
}

/* Expired: _exit(1) from the watchdog thread, long before the child's own
 * exit. */
static void expires(void **state)
{
	int status;

	(void)state;
	status = child_run(50, 10000);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 1);

	/* Over a second: the whole seconds count as well. */
	status = child_run(1050, 10000);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 1);

	/* The same child stopping in time exits 0. */
	status = child_run(10000, 50);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

CMOCKA_MAIN({
        cmocka_unit_test(stop_in_time),
        cmocka_unit_test(stop_without_start),
        cmocka_unit_test(expires),
})
