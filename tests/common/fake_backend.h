/*
 * fake_backend.h: one backend (src/backend/backend.h) for the tests of
 * frameprepd's loop, in place of the CPU and GPU backends, that does what
 * each test sets:
 *
 *   jobs     queued by submit (or refused: refuse), run in order on the
 *            fake's thread: after delay_us each, once batch of them are
 *            queued (0: at once), and, with hold_jobs, only as many as
 *            fake_backend_allow_jobs allows; finish (default: status OK,
 *            the output untouched) writes each job's result before its
 *            done is called.
 *   regions  an OPEN maps shared memory (fprep__memreg_map) or opens a
 *            CUDA handle as a stand-in allocation, never touched; a CLOSE
 *            undoes that. They run at once on the calling (loop) thread,
 *            as the CPU backend does; with hold_regions they wait in a
 *            queue, run on the fake's thread as far as
 *            fake_backend_allow_regions allows, or on the caller by
 *            fake_backend_run_regions (a test without jobs need not start
 *            the thread, and may then change hold_regions between calls).
 *
 * close runs what is still queued, whatever was allowed, and joins the
 * thread; the struct stays for the test to read its counters, and
 * fake_backend_free frees it. The counters change under the fake's lock:
 * read them with fake_backend_count, wait for them with fake_backend_wait.
 */
#ifndef FPREP_TESTS_FAKE_BACKEND_H
#define FPREP_TESTS_FAKE_BACKEND_H

#include <pthread.h>

#include "backend.h"
#include "memreg.h"
#include "queue.h"

typedef struct fake_backend fake_backend;

/* fake_finish_fn writes the result of job, the nth job the fake ran (from
 * 0), on the fake's thread before job->done is called: status, fatal,
 * message, output, times. */
typedef void (*fake_finish_fn)(fake_backend *fb, fprep__job *job, unsigned n);

struct fake_backend {
	fprep__backend b; /* give &fb->b to the server */

	/* Settings: before the first call, read-only after. */
	fake_finish_fn finish; /* NULL: status OK, t_start/t_end now */
	void *data;            /* the test's, for finish */
	unsigned batch;        /* jobs wait until this many are queued */
	unsigned delay_us;     /* each job's time on the fake's thread */
	int hold_jobs;         /* jobs run only when allowed */
	int hold_regions;      /* region operations wait in the queue */
	int refuse;            /* submit refuses with FPREP_EUNSUPPORTED */
	const char *info;      /* info's text; NULL: "fake: yes\n" */

	/* Counters, under lock. */
	unsigned jobs_queued;    /* submitted */
	unsigned jobs_done;      /* their done returned */
	unsigned regions_queued; /* region operations asked for */
	unsigned regions_ran;    /* ... whose done was called */
	unsigned maps;           /* OPENs that succeeded */
	unsigned unmaps;         /* CLOSEs */

	/* The fake's own. */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t thread;
	int running;              /* thread started, not joined */
	int stop;                 /* close began */
	fprep__queue jobs;        /* queued jobs (job->link) */
	fprep__queue regions;     /* held region operations (r->link) */
	unsigned jobs_allowed;    /* with hold_jobs: jobs that may run in
	                             all */
	unsigned regions_allowed; /* with hold_regions: operations that
	                             may run on the fake's thread in all */
	unsigned jobs_ran;        /* jobs taken off the queue */
	unsigned regions_taken;   /* operations taken off the queue */
	int batch_met;            /* batch jobs were queued once */
};

/* fake_backend_new allocates a fake with its operations set and every
 * setting 0 (exits the test when out of memory); set what the test needs,
 * then fake_backend_start. */
fake_backend *fake_backend_new(void);

/* fake_backend_start starts the fake's thread; returns &fb->b. */
fprep__backend *fake_backend_start(fake_backend *fb);

/* fake_backend_free frees fb, after its close (or before its start). */
void fake_backend_free(fake_backend *fb);

/* fake_backend_allow_jobs lets held jobs run until n have run in all;
 * any thread. */
void fake_backend_allow_jobs(fake_backend *fb, unsigned n);

/* fake_backend_allow_regions lets held region operations run on the
 * fake's thread until n have been taken in all; any thread. */
void fake_backend_allow_regions(fake_backend *fb, unsigned n);

/* fake_backend_run_regions runs the held region operations on the
 * calling thread; returns how many. */
unsigned fake_backend_run_regions(fake_backend *fb);

/* fake_backend_count reads counter (a field of fb) under the lock. */
unsigned fake_backend_count(fake_backend *fb, const unsigned *counter);

/* fake_backend_wait waits until counter (a field of fb) reaches n;
 * returns 0, or -1 after timeout_ms. */
int fake_backend_wait(fake_backend *fb, const unsigned *counter, unsigned n,
                      int timeout_ms);

#endif /* FPREP_TESTS_FAKE_BACKEND_H */
