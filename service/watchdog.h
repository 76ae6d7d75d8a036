/*
 * watchdog.h: a thread that ends the process if a phase (shutdown) does not
 * finish in time, since a wedged GPU (or a library's bug: nng 1.5.2 could
 * hang nng_close) can hang a close.
 */
#ifndef FPREP_SERVICE_WATCHDOG_H
#define FPREP_SERVICE_WATCHDOG_H

#include <pthread.h>

/* fprep__watchdog: embedded; zero it before the first start. */
typedef struct fprep__watchdog {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int timeout_ms;
	int disarmed;
	int running;
} fprep__watchdog;

/* fprep__watchdog_start starts the thread: unless fprep__watchdog_stop is
 * called within timeout_ms, it logs an error and calls _exit(1). Returns 0
 * or FPREP_ENOMEM (no thread: nothing to stop). */
int fprep__watchdog_start(fprep__watchdog *wd, int timeout_ms);

/* fprep__watchdog_stop disarms the watchdog and joins its thread. Safe to
 * call when it was never started. */
void fprep__watchdog_stop(fprep__watchdog *wd);

#endif /* FPREP_SERVICE_WATCHDOG_H */
