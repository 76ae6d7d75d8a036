/*
 * waker_futex.c: the doorbells' waker (daemon.h, fprep__waker) on
 * futex_waitv(2), Linux 5.16 and later; no_futex_waitv.c stands in where
 * the system headers have no such call.
 *
 * The thread waits at once on its own word, gen, and on every wake word
 * the loop published; a client that rings (FUTEX_WAKE on its word) or a
 * word that no longer holds ARMED ends the wait, and the thread queues
 * one FPREP__EV_DOORBELL event (at most one at a time: queued), then
 * sleeps on gen alone until the loop publishes again, which it does after
 * it handled the ring. The thread touches only its own fields and the
 * words' addresses, under mu.
 */
#include <errno.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "daemon.h"
#include "log.h"

/* waker_main: the waker thread. */
static void *waker_main(void *arg)
{
	fprep__waker *w = arg;
	struct futex_waitv v[FPREP__WAKER_WORDS + 1];

	for (;;) {
		pthread_mutex_lock(&w->mu);
		if (w->stop) {
			pthread_mutex_unlock(&w->mu);
			break;
		}
		uint32_t g = atomic_load(&w->gen);
		unsigned n = w->nwords;

		memset(v, 0, sizeof(v[0]) * (n + 1));
		v[0].val = g;
		v[0].uaddr = (uint64_t)(uintptr_t)&w->gen;
		v[0].flags = FUTEX_32 | FUTEX_PRIVATE_FLAG;
		for (unsigned k = 0; k < n; k++) {
			v[k + 1].val = FPREP_DOORBELL_WAKE_ARMED;
			v[k + 1].uaddr = w->words[k];
			v[k + 1].flags = FUTEX_32; /* shared with the client */
		}
		pthread_mutex_unlock(&w->mu);
		long r = syscall(SYS_futex_waitv, v, n + 1, 0, NULL, 0);
		int e = errno;

		if (atomic_load(&w->gen) != g)
			continue; /* the loop changed the set */
		if (r == 0 || (r < 0 && e == EINTR))
			continue;
		/* A word rang (woken, or not ARMED as the wait began); or a
		 * word could not be read (EFAULT): the loop looks, and the
		 * waker sleeps until the loop has changed the set. */
		if (r < 0 && e != EAGAIN)
			fprep__log(FPREP_LOG_DEBUG, "futex_waitv: %s",
			           strerror(e));
		if (!atomic_exchange(&w->queued, 1))
			fprep__evq_push(w->evq, &w->ev);
		while (atomic_load(&w->gen) == g)
			syscall(SYS_futex, &w->gen, FUTEX_WAIT_PRIVATE, g, NULL,
			        NULL, 0);
	}
	return NULL;
}

int fprep__waker_start(fprep__waker *w, fprep__evq *evq)
{
	w->evq = evq;
	/* No futexes is EINVAL where the call exists. */
	if (syscall(SYS_futex_waitv, NULL, 0, 0, NULL, 0) == 0 ||
	    errno != EINVAL) {
		fprep__log(FPREP_LOG_INFO,
		           "doorbells: no futex_waitv in this kernel: a client "
		           "finds the daemon asleep and uses the socket");
		return -1;
	}
	pthread_mutex_init(&w->mu, NULL);
	if (pthread_create(&w->thread, NULL, waker_main, w) != 0) {
		pthread_mutex_destroy(&w->mu);
		fprep__log(FPREP_LOG_WARNING,
		           "doorbells: cannot start the waker thread");
		return -1;
	}
	w->running = 1;
	return 0;
}

void fprep__waker_publish(fprep__waker *w, _Atomic uint32_t *const *words,
                          unsigned n)
{
	if (!w->running)
		return;
	pthread_mutex_lock(&w->mu);
	for (unsigned i = 0; i < n && i < FPREP__WAKER_WORDS; i++)
		w->words[i] = (uint64_t)(uintptr_t)words[i];
	w->nwords = n < FPREP__WAKER_WORDS ? n : FPREP__WAKER_WORDS;
	atomic_fetch_add(&w->gen, 1);
	pthread_mutex_unlock(&w->mu);
	syscall(SYS_futex, &w->gen, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

void fprep__waker_stop(fprep__waker *w)
{
	if (!w->running)
		return;
	pthread_mutex_lock(&w->mu);
	w->stop = 1;
	w->nwords = 0;
	atomic_fetch_add(&w->gen, 1);
	pthread_mutex_unlock(&w->mu);
	syscall(SYS_futex, &w->gen, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	pthread_join(w->thread, NULL);
	pthread_mutex_destroy(&w->mu);
	w->running = 0;
}
