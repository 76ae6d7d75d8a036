/*
 * doorbell.c: requests taken from shared memory (protocol.h, "Doorbells").
 *
 * A client's doorbell is an area of one of its shared-memory regions; the
 * loop thread polls every area while it spins (server.c), takes a POSTED
 * entry with a compare-and-swap, copies its header into a message of its
 * own and hands it to the request state machine (slot.c) in a slot of the
 * doorbell pool, as if nng had received it from the client's connection.
 * Such a slot has no nng context: its reply, whatever it is, goes into the
 * entry (answer.c), and at its end the slot returns to the pool.
 *
 * A doorbell holds a use of its region, so the mapping stays while it is
 * polled; each request taken holds one more until its reply is written.
 * The doorbell goes on DOORBELL with 0 entries, before its region is
 * unregistered, when its connection closes, when the SIGBUS guard catches
 * its region, and at shutdown. The loop alone touches any of it.
 *
 * While the loop does not poll, a thread of its own, the waker, sleeps in
 * futex_waitv(2) on the doorbells' wake words, which the loop arms; a
 * client that finds polling = 0 and its word armed rings it (FUTEX_WAKE),
 * and the waker hands the loop an FPREP__EV_DOORBELL event: one wake-up
 * in the daemon instead of nng's socket and threads in both processes.
 * The waker touches only its own fields and the words' addresses the loop
 * gives it under its mutex.
 */
#include <errno.h>
#include <inttypes.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "server_internal.h"

/* doorbell_word: the 32-bit atomic at offset off of the area. */
static _Atomic uint32_t *doorbell_word(uint8_t *p)
{
	return (_Atomic uint32_t *)(void *)p;
}

/* doorbell_wake: the wake word of doorbell d's area. */
static _Atomic uint32_t *doorbell_wake(const fprep__doorbell *d)
{
	return doorbell_word(d->area + FPREP_DOORBELL_WAKE_AT);
}

/* waker_publish gives the waker thread the wake words to sleep on: those
 * of the doorbells it covers, while the loop does not poll, else none;
 * then bumps gen and wakes the thread, which waits on the new set. Loop
 * thread. */
static void waker_publish(fprep__server *srv)
{
	fprep__doorbell_waker *w = &srv->waker;
	unsigned n = 0;

	if (!w->running)
		return;
	pthread_mutex_lock(&w->mu);
	for (unsigned i = 0; i < srv->ndoorbells && !srv->polling; i++) {
		const fprep__doorbell *d = &srv->doorbells[i];

		if (d->waked && !fprep__memreg_broken(d->region))
			w->words[n++] = (uint64_t)(uintptr_t)doorbell_wake(d);
	}
	w->nwords = n;
	atomic_fetch_add(&w->gen, 1);
	pthread_mutex_unlock(&w->mu);
	syscall(SYS_futex, &w->gen, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* doorbell_arm stores ARMED (on, which clears RUNG) or 0 into the wake
 * word of every doorbell the waker covers. Loop thread. */
static void doorbell_arm(fprep__server *srv, int on)
{
	for (unsigned i = 0; i < srv->ndoorbells; i++) {
		fprep__doorbell *d = &srv->doorbells[i];

		if (d->waked && !fprep__memreg_broken(d->region))
			atomic_store(doorbell_wake(d),
			             on ? FPREP_DOORBELL_WAKE_ARMED : 0);
	}
}

/* doorbell_entry: entry k of doorbell d. */
static uint8_t *doorbell_entry(const fprep__doorbell *d, unsigned k)
{
	return d->area + FPREP_DOORBELL_HEADER_SIZE +
	       (size_t)k * FPREP_DOORBELL_ENTRY_SIZE;
}

/* doorbell_drop ends doorbell d: its area says nobody polls, and the
 * region loses the doorbell's use. */
static void doorbell_drop(fprep__server *srv, fprep__doorbell *d)
{
	int waked = d->waked;

	if (!fprep__memreg_broken(d->region)) {
		atomic_store(doorbell_word(d->area), 0);
		atomic_store(doorbell_wake(d), 0);
	}
	fprep__regions_unuse(&srv->regions, d->region);
	srv->nwaked -= (unsigned)waked;
	*d = srv->doorbells[--srv->ndoorbells];
	if (waked)
		waker_publish(srv);
}

/* doorbell_find returns the doorbell in region r, or NULL. */
static fprep__doorbell *doorbell_find(fprep__server *srv,
                                      const fprep__memreg *r)
{
	for (unsigned i = 0; i < srv->ndoorbells; i++)
		if (srv->doorbells[i].region == r)
			return &srv->doorbells[i];
	return NULL;
}

int fprep__doorbell_set(fprep__server *srv, uint32_t pipe,
                        const fprep_register_request *req, char *why,
                        size_t why_size)
{
	uint64_t len =
	        FPREP_DOORBELL_HEADER_SIZE +
	        (uint64_t)req->doorbell_entries * FPREP_DOORBELL_ENTRY_SIZE;
	fprep__doorbell *d;
	fprep__memreg *r;
	int rv;

	r = fprep__regions_find(&srv->regions, req->region_id, pipe);
	if (r == NULL || fprep__memreg_on_device(r)) {
		snprintf(why, why_size,
		         "region_id %" PRIu32 " is not a shared-memory "
		         "region of this connection",
		         req->region_id);
		return FPREP_EREGION;
	}
	d = doorbell_find(srv, r);
	if (req->doorbell_entries == 0) {
		if (d == NULL) {
			snprintf(why, why_size,
			         "region %" PRIu32 " has no doorbell",
			         req->region_id);
			return FPREP_EREGION;
		}
		doorbell_drop(srv, d);
		return FPREP_OK;
	}
	rv = fprep__memreg_span(r, req->doorbell_offset, len,
	                        "offset + doorbell area", why, why_size);
	if (rv != 0)
		return rv;
	if (d != NULL) {
		doorbell_drop(srv, d);
	} else if (srv->cfg->max_doorbells == 0) {
		snprintf(why, why_size,
		         "doorbells are off (--max-doorbells 0)");
		return FPREP_EPERM;
	} else if (srv->ndoorbells >= srv->cfg->max_doorbells) {
		snprintf(why, why_size,
		         "%u doorbells are polled: the limit is "
		         "--max-doorbells %u",
		         srv->ndoorbells, srv->cfg->max_doorbells);
		return FPREP_ELIMIT;
	}
	d = &srv->doorbells[srv->ndoorbells++];
	d->region = r;
	d->pipe = pipe;
	d->area = r->base + req->doorbell_offset;
	d->entries = req->doorbell_entries;
	d->waked = srv->waker.running && srv->nwaked < FPREP__WAKER_WORDS;
	srv->nwaked += (unsigned)d->waked;
	fprep__regions_use(r);
	/* As the loop does for every doorbell: armed before polling = 0. */
	atomic_store(doorbell_wake(d),
	             d->waked && !srv->polling ? FPREP_DOORBELL_WAKE_ARMED : 0);
	atomic_store(doorbell_word(d->area), (uint32_t)srv->polling);
	if (d->waked)
		waker_publish(srv);
	return FPREP_OK;
}

void fprep__doorbell_drop_region(fprep__server *srv, uint32_t id, uint32_t pipe)
{
	for (unsigned i = 0; i < srv->ndoorbells; i++)
		if (srv->doorbells[i].region->id == id &&
		    srv->doorbells[i].pipe == pipe) {
			doorbell_drop(srv, &srv->doorbells[i]);
			return;
		}
}

void fprep__doorbell_drop_pipe(fprep__server *srv, uint32_t pipe)
{
	for (unsigned i = 0; i < srv->ndoorbells;)
		if (srv->doorbells[i].pipe == pipe)
			doorbell_drop(srv, &srv->doorbells[i]);
		else
			i++;
}

void fprep__doorbell_drop_all(fprep__server *srv)
{
	while (srv->ndoorbells > 0)
		doorbell_drop(srv, &srv->doorbells[0]);
}

/* doorbell_take takes entry e of doorbell d into a free slot of the pool
 * when it holds a POSTED request. Returns 1 when it took one, 0 when
 * there was none, -1 when the pool is empty. */
static int doorbell_take(fprep__server *srv, fprep__doorbell *d, uint8_t *e)
{
	uint32_t posted = FPREP_DOORBELL_POSTED;
	_Atomic uint32_t *state = doorbell_word(e);
	fprep__slot *s;
	nng_msg *msg;

	if (atomic_load_explicit(state, memory_order_relaxed) != posted)
		return 0;
	if (srv->ndoorbell_free == 0)
		return -1;
	if (nng_msg_alloc(&msg, FPREP_REQUEST_HEADER_SIZE) != 0)
		return -1; /* left POSTED: taken later, or back by the client */
	if (!atomic_compare_exchange_strong(state, &posted,
	                                    FPREP_DOORBELL_TAKEN)) {
		nng_msg_free(msg); /* the client took it back */
		return 0;
	}
	/* After the replies written into this region before, which the
	 * client read before it posted this request: the ordering runs
	 * through the client's process, where ThreadSanitizer cannot see
	 * it (fprep__memreg.replies). */
	(void)atomic_load_explicit(&d->region->replies, memory_order_acquire);
	/* TAKEN: the request bytes stay as they are until the reply. */
	memcpy(nng_msg_body(msg), e + FPREP_DOORBELL_REQUEST_AT,
	       FPREP_REQUEST_HEADER_SIZE);
	nng_msg_set_pipe(msg, (nng_pipe){.id = d->pipe});
	s = srv->doorbell_free[--srv->ndoorbell_free];
	s->db_region = d->region;
	s->db_reply = e + FPREP_DOORBELL_REPLY_AT;
	fprep__regions_use(d->region);
	srv->doorbell_requests++;
	fprep__slot_take(s, msg);
	return 1;
}

unsigned fprep__doorbell_poll(fprep__server *srv)
{
	unsigned taken = 0;

	for (unsigned i = 0; i < srv->ndoorbells;) {
		fprep__doorbell *d = &srv->doorbells[i];

		if (fprep__memreg_broken(d->region)) {
			doorbell_drop(srv, d);
			continue;
		}
		for (unsigned k = 0; k < d->entries; k++) {
			int rv = doorbell_take(srv, d, doorbell_entry(d, k));

			if (rv < 0)
				return taken;
			taken += (unsigned)rv;
		}
		i++;
	}
	return taken;
}

void fprep__doorbell_set_polling(fprep__server *srv, int on)
{
	if (srv->polling == on)
		return;
	srv->polling = on;
	/* Armed before polling = 0, cleared after polling = 1: a client
	 * that reads polling = 0 then finds its word armed, or uses nng
	 * (protocol.h). */
	if (!on)
		doorbell_arm(srv, 1);
	for (unsigned i = 0; i < srv->ndoorbells; i++)
		if (!fprep__memreg_broken(srv->doorbells[i].region))
			atomic_store(doorbell_word(srv->doorbells[i].area),
			             (uint32_t)on);
	if (on)
		doorbell_arm(srv, 0);
	waker_publish(srv);
}

void fprep__doorbell_rung(fprep__server *srv)
{
	atomic_store(&srv->waker.queued, 0);
	srv->waker.rings++;
	if (!srv->polling) {
		/* No spin (--spin-us 0): RUNG is cleared before the entries
		 * are looked at, so a later ring is seen; then the waker
		 * sleeps again. */
		doorbell_arm(srv, 1);
		fprep__doorbell_poll(srv);
		waker_publish(srv);
		return;
	}
	fprep__doorbell_poll(srv);
}

#ifdef SYS_futex_waitv
/* waker_main: the waker thread (fprep__doorbell_waker). */
static void *waker_main(void *arg)
{
	fprep__server *srv = arg;
	fprep__doorbell_waker *w = &srv->waker;
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
			fprep__evq_push(&srv->evq, &w->ev);
		while (atomic_load(&w->gen) == g)
			syscall(SYS_futex, &w->gen, FUTEX_WAIT_PRIVATE, g, NULL,
			        NULL, 0);
	}
	return NULL;
}
#endif

void fprep__doorbell_waker_start(fprep__server *srv)
{
	fprep__doorbell_waker *w = &srv->waker;

	w->ev.kind = FPREP__EV_DOORBELL;
	if (srv->cfg->max_doorbells == 0)
		return;
#ifdef SYS_futex_waitv
	/* No futexes is EINVAL where the call exists. */
	if (syscall(SYS_futex_waitv, NULL, 0, 0, NULL, 0) == 0 ||
	    errno != EINVAL) {
		fprep__log(FPREP_LOG_INFO,
		           "doorbells: no futex_waitv in this kernel: a client "
		           "finds the daemon asleep and uses the socket");
		return;
	}
	pthread_mutex_init(&w->mu, NULL);
	if (pthread_create(&w->thread, NULL, waker_main, srv) != 0) {
		pthread_mutex_destroy(&w->mu);
		fprep__log(FPREP_LOG_WARNING,
		           "doorbells: cannot start the waker thread");
		return;
	}
	w->running = 1;
#endif
}

void fprep__doorbell_waker_stop(fprep__server *srv)
{
	fprep__doorbell_waker *w = &srv->waker;

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

void fprep__doorbell_slot_end(fprep__slot *s)
{
	fprep__server *srv = s->srv;

	fprep__regions_unuse(&srv->regions, s->db_region);
	s->db_region = NULL;
	s->db_reply = NULL;
	if (s->state != FPREP__SLOT_IDLE)
		srv->active--;
	s->state = FPREP__SLOT_IDLE;
	srv->doorbell_free[srv->ndoorbell_free++] = s;
	if (srv->stopping && srv->active == 0 && !srv->forcing)
		fprep__server_finish(srv);
}
