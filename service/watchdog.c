/*
 * watchdog.c: the shutdown watchdog (see watchdog.h).
 *
 * The thread waits on a condition variable with a CLOCK_MONOTONIC deadline;
 * fprep__watchdog_stop sets the disarmed flag and signals it. If the
 * deadline passes first the process ends at once with _exit(1): no atexit
 * handlers, no destructors, nothing that could wait on the hung code.
 */
#include "watchdog.h"

#include <errno.h>
#include <time.h>
#include <unistd.h>

#include "frameprep/frameprep.h"
#include "log.h"

static void *watchdog_main(void *arg)
{
	fprep__watchdog *wd = arg;
	struct timespec deadline;
	int rv = 0;

	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += wd->timeout_ms / 1000;
	deadline.tv_nsec += (long)(wd->timeout_ms % 1000) * 1000000L;
	if (deadline.tv_nsec >= 1000000000L) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&wd->lock);
	while (!wd->disarmed && rv != ETIMEDOUT)
		rv = pthread_cond_timedwait(&wd->cond, &wd->lock, &deadline);
	if (!wd->disarmed) {
		fprep__log(FPREP_LOG_ERR,
		           "watchdog: shutdown did not finish within %d ms: "
		           "exiting with status 1",
		           wd->timeout_ms);
		_exit(1);
	}
	pthread_mutex_unlock(&wd->lock);
	return NULL;
}

int fprep__watchdog_start(fprep__watchdog *wd, int timeout_ms)
{
	pthread_condattr_t attr;

	wd->timeout_ms = timeout_ms;
	wd->disarmed = 0;
	wd->running = 0;
	if (pthread_mutex_init(&wd->lock, NULL) != 0)
		return FPREP_ENOMEM;
	if (pthread_condattr_init(&attr) != 0)
		goto err_lock;
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	if (pthread_cond_init(&wd->cond, &attr) != 0) {
		pthread_condattr_destroy(&attr);
		goto err_lock;
	}
	pthread_condattr_destroy(&attr);
	if (pthread_create(&wd->thread, NULL, watchdog_main, wd) != 0)
		goto err_cond;
	wd->running = 1;
	return 0;

err_cond:
	pthread_cond_destroy(&wd->cond);
err_lock:
	pthread_mutex_destroy(&wd->lock);
	return FPREP_ENOMEM;
}

void fprep__watchdog_stop(fprep__watchdog *wd)
{
	if (!wd->running)
		return;
	pthread_mutex_lock(&wd->lock);
	wd->disarmed = 1;
	pthread_cond_signal(&wd->cond);
	pthread_mutex_unlock(&wd->lock);
	pthread_join(wd->thread, NULL);
	pthread_cond_destroy(&wd->cond);
	pthread_mutex_destroy(&wd->lock);
	wd->running = 0;
}
