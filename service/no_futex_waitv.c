/*
 * no_futex_waitv.c: the doorbells' waker where the system headers have no
 * futex_waitv(2) (before Linux 5.16): there is no thread and no word is
 * armed, so a client that finds the daemon not polling uses nng
 * (protocol.h, "Doorbells"). CMake builds this file instead of
 * waker_futex.c.
 */
#include "daemon.h"
#include "log.h"

int fprep__waker_start(fprep__waker *w, fprep__evq *evq)
{
	w->evq = evq;
	fprep__log(FPREP_LOG_INFO,
	           "doorbells: built without futex_waitv: a client finds the "
	           "daemon asleep and uses the socket");
	return -1;
}

void fprep__waker_publish(fprep__waker *w, _Atomic uint32_t *const *words,
                          unsigned n)
{
	(void)w;
	(void)words;
	(void)n;
}

void fprep__waker_stop(fprep__waker *w)
{
	(void)w;
}
