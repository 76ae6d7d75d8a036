/*
 * port_doorbell.c: the doorbell port (port.h): requests taken from shared
 * memory (protocol.h, "Doorbells").
 *
 * A client's doorbell is an area of one of its shared-memory regions; the
 * loop polls every area while it spins (the port's poll), takes a POSTED
 * entry with a compare-and-swap, copies its header into a slot of the
 * port's pool and hands it to the request machine with an ENTRY sink: its
 * reply, whatever it is, goes into the entry, and at its end the slot
 * returns to the pool. No nng message is made for it.
 *
 * A doorbell holds a use of its region, so the mapping stays while it is
 * polled; each request taken holds one more until its reply is written.
 * The doorbell goes on DOORBELL with 0 entries, before its region is
 * unregistered, when its connection closes, when the SIGBUS guard catches
 * its region, and at shutdown (the port's close).
 *
 * Bounds a client cannot get around: the port takes no more of a
 * connection's entries than its in-flight bound (--max-inflight-per-conn)
 * allows, and leaves the rest POSTED until one of its requests ends (its
 * client may take them back and use nng); it never closes the connection
 * for what it took itself. A connection, and a user (the peer uid of its
 * regions), get at most their shares of --max-doorbells (config.h,
 * fprep__shares). A tensor or reply may not be written over a
 * doorbell area (slot.c asks fprep__doorbells_overlap), so no request
 * posts another. A doorbell rung again and again with nothing posted is
 * muted for DB_MUTE_MS: its word is not armed, so its client finds the
 * daemon neither polling nor armed and uses nng, and the rings cost the
 * daemon nothing.
 *
 * While the loop does not poll, the waker thread (waker_futex.c) sleeps on
 * the armed wake words; a client that finds polling = 0 and its word
 * armed rings it, and the waker hands the loop an FPREP__EV_DOORBELL
 * event (fprep__doorbells_rung). The loop alone touches the rest.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "daemon.h"
#include "log.h"
#include "metrics.h"
#include "slot_state.h"

/* Rings of one doorbell that find nothing posted, within DB_IDLE_WINDOW_MS,
 * before it is muted for DB_MUTE_MS. A client that rings only after it
 * posted finds an idle ring only when the spinning loop took its entry
 * first: a few in a window. */
#define DB_IDLE_RINGS     32
#define DB_IDLE_WINDOW_MS 100
#define DB_MUTE_MS        100

/* db_word: the 32-bit atomic at p. */
static _Atomic uint32_t *db_word(uint8_t *p)
{
	return (_Atomic uint32_t *)(void *)p;
}

/* db_wake: the wake word of doorbell d's area. */
static _Atomic uint32_t *db_wake(const fprep__doorbell *d)
{
	return db_word(d->area + FPREP_DOORBELL_WAKE_AT);
}

/* db_entry: entry k of doorbell d. */
static uint8_t *db_entry(const fprep__doorbell *d, unsigned k)
{
	return d->area + FPREP_DOORBELL_HEADER_SIZE +
	       (size_t)k * FPREP_DOORBELL_ENTRY_SIZE;
}

/* db_armable tells whether d's wake word is armed while the loop sleeps. */
static int db_armable(const fprep__doorbell *d)
{
	return d->waked && !d->muted && !fprep__memreg_broken(d->region);
}

/* db_publish gives the waker the wake words to sleep on: those of the
 * doorbells it covers, while the loop does not poll, else none. */
static void db_publish(fprep__doorbells *db)
{
	_Atomic uint32_t *words[FPREP__WAKER_WORDS];
	unsigned n = 0;

	if (!db->waker.running)
		return;
	for (unsigned i = 0; i < db->nbells && !db->polling; i++)
		if (db_armable(&db->bells[i]) && n < FPREP__WAKER_WORDS)
			words[n++] = db_wake(&db->bells[i]);
	fprep__waker_publish(&db->waker, words, n);
}

/* db_arm stores ARMED (on, which clears RUNG) or 0 into the wake word of
 * every doorbell the waker covers. */
static void db_arm(fprep__doorbells *db, int on)
{
	for (unsigned i = 0; i < db->nbells; i++) {
		fprep__doorbell *d = &db->bells[i];

		if (d->waked && !fprep__memreg_broken(d->region))
			atomic_store(db_wake(d),
			             on && !d->muted ? FPREP_DOORBELL_WAKE_ARMED
			                             : 0);
	}
}

/* db_drop ends doorbell d: its area says nobody polls, and the region
 * loses the doorbell's use. */
static void db_drop(fprep__doorbells *db, fprep__doorbell *d)
{
	int waked = d->waked;

	if (!fprep__memreg_broken(d->region)) {
		atomic_store(db_word(d->area), 0);
		atomic_store(db_wake(d), 0);
	}
	fprep__regions_unuse(&db->srv->regions, d->region);
	db->nwaked -= (unsigned)waked;
	*d = db->bells[--db->nbells];
	fprep__metrics_doorbells(db->nbells, db->srv->cfg->max_doorbells);
	if (waked)
		db_publish(db);
}

/* db_find returns the doorbell in region r, or NULL. */
static fprep__doorbell *db_find(fprep__doorbells *db, const fprep__memreg *r)
{
	for (unsigned i = 0; i < db->nbells; i++)
		if (db->bells[i].region == r)
			return &db->bells[i];
	return NULL;
}

/* db_share checks one more doorbell for connection pipe, whose region r
 * belongs to the peer's uid (shared memory only), against the
 * connection's and the user's shares of --max-doorbells. Returns 0 or
 * FPREP_ELIMIT with why. */
static int db_share(const fprep__doorbells *db, uint32_t pipe,
                    const fprep__memreg *r, char *why, size_t why_size)
{
	const fprep__shares *sh = &db->srv->cfg->shares;
	uint64_t uid = r->u.shm.peer_uid;
	unsigned conn = 0, user = 0;

	for (unsigned i = 0; i < db->nbells; i++) {
		conn += db->bells[i].pipe == pipe;
		user += db->bells[i].region->u.shm.peer_uid == uid;
	}
	if (sh->doorbells_per_conn > 0 && conn >= sh->doorbells_per_conn) {
		snprintf(why, why_size,
		         "this connection has %u doorbells: the limit is "
		         "--max-doorbells-per-conn %u",
		         conn, sh->doorbells_per_conn);
		return FPREP_ELIMIT;
	}
	if (sh->doorbells_per_uid > 0 && user >= sh->doorbells_per_uid) {
		snprintf(
		        why, why_size,
		        "uid %" PRIu64 " has %u doorbells (all its "
		        "connections): the limit is --max-doorbells-per-uid %u",
		        uid, user, sh->doorbells_per_uid);
		return FPREP_ELIMIT;
	}
	return 0;
}

int fprep__doorbells_set(fprep__doorbells *db, uint32_t pipe,
                         const fprep_register_request *req, char *why,
                         size_t why_size)
{
	const fprep__config *cfg = db->srv->cfg;
	uint64_t len =
	        FPREP_DOORBELL_HEADER_SIZE +
	        (uint64_t)req->doorbell_entries * FPREP_DOORBELL_ENTRY_SIZE;
	fprep__doorbell *d;
	fprep__memreg *r;
	int rv;

	r = fprep__regions_find(&db->srv->regions, req->region_id, pipe);
	if (r == NULL || fprep__memreg_on_device(r)) {
		snprintf(why, why_size,
		         "region_id %" PRIu32 " is not a shared-memory "
		         "region of this connection",
		         req->region_id);
		return FPREP_EREGION;
	}
	d = db_find(db, r);
	if (req->doorbell_entries == 0) {
		if (d == NULL) {
			snprintf(why, why_size,
			         "region %" PRIu32 " has no doorbell",
			         req->region_id);
			return FPREP_EREGION;
		}
		db_drop(db, d);
		return FPREP_OK;
	}
	rv = fprep__memreg_span(r, req->doorbell_offset, len,
	                        "offset + doorbell area", why, why_size);
	if (rv != 0)
		return rv;
	if (d != NULL) {
		db_drop(db, d);
	} else if (cfg->max_doorbells == 0) {
		snprintf(why, why_size,
		         "doorbells are off (--max-doorbells 0)");
		return FPREP_EPERM;
	} else if (db->nbells >= cfg->max_doorbells) {
		snprintf(why, why_size,
		         "%u doorbells are polled: the limit is "
		         "--max-doorbells %u",
		         db->nbells, cfg->max_doorbells);
		return FPREP_ELIMIT;
	} else if ((rv = db_share(db, pipe, r, why, why_size)) != 0) {
		return rv;
	}
	d = &db->bells[db->nbells++];
	fprep__metrics_doorbells(db->nbells, cfg->max_doorbells);
	memset(d, 0, sizeof(*d));
	d->region = r;
	d->pipe = pipe;
	d->area = r->base + req->doorbell_offset;
	d->entries = req->doorbell_entries;
	d->waked = db->waker.running && db->nwaked < FPREP__WAKER_WORDS;
	db->nwaked += (unsigned)d->waked;
	fprep__regions_use(r);
	/* As the loop does for every doorbell: armed before polling = 0. */
	atomic_store(db_wake(d),
	             d->waked && !db->polling ? FPREP_DOORBELL_WAKE_ARMED : 0);
	atomic_store(db_word(d->area), (uint32_t)db->polling);
	if (d->waked)
		db_publish(db);
	return FPREP_OK;
}

void fprep__doorbells_drop_region(fprep__doorbells *db, uint32_t id,
                                  uint32_t pipe)
{
	for (unsigned i = 0; i < db->nbells; i++)
		if (db->bells[i].region->id == id &&
		    db->bells[i].pipe == pipe) {
			db_drop(db, &db->bells[i]);
			return;
		}
}

void fprep__doorbells_drop_pipe(fprep__doorbells *db, uint32_t pipe)
{
	for (unsigned i = 0; i < db->nbells;)
		if (db->bells[i].pipe == pipe)
			db_drop(db, &db->bells[i]);
		else
			i++;
}

int fprep__doorbells_overlap(const fprep__doorbells *db, const fprep__memreg *r,
                             const uint8_t *p, uint64_t len)
{
	for (unsigned i = 0; i < db->nbells; i++) {
		const fprep__doorbell *d = &db->bells[i];
		uint64_t area =
		        FPREP_DOORBELL_HEADER_SIZE +
		        (uint64_t)d->entries * FPREP_DOORBELL_ENTRY_SIZE;

		/* Both spans lie inside r (fprep__memreg_span). */
		if (d->region == r && p < d->area + area && d->area < p + len)
			return 1;
	}
	return 0;
}

/* db_take takes entry e of doorbell d into a free slot of the pool when it
 * holds a POSTED request. Returns 1 when it took one, 0 when there was
 * none, -1 when it may take no more now: the pool is empty, or d's
 * connection is at its in-flight bound. */
static int db_take(fprep__doorbells *db, fprep__doorbell *d, uint8_t *e)
{
	fprep__server *srv = db->srv;
	uint32_t posted = FPREP_DOORBELL_POSTED;
	_Atomic uint32_t *state = db_word(e);
	fprep__slot *s;

	if (atomic_load_explicit(state, memory_order_relaxed) != posted)
		return 0;
	if (db->nfree == 0 || fprep__conn_inflight(srv, d->pipe) >=
	                              srv->cfg->max_inflight_per_conn) {
		db->deferred = 1; /* looked at again when a request ends */
		return -1;
	}
	if (!atomic_compare_exchange_strong(state, &posted,
	                                    FPREP_DOORBELL_TAKEN))
		return 0; /* the client took it back */
	/* After the replies written into this region before, which the
	 * client read before it posted this request: the ordering runs
	 * through the client's process, where ThreadSanitizer cannot see
	 * it (fprep__memreg.replies). */
	(void)atomic_load_explicit(&d->region->replies, memory_order_acquire);
	s = db->free[--db->nfree];
	FPREP__ASSERT(s->state == FPREP__SLOT_IDLE);
	if (srv->cfg->trace)
		s->t_rx_ns = fprep__now_ns();
	/* TAKEN: the client leaves the request as it is until the reply;
	 * it is read once, here. */
	memcpy(s->req_head, e + FPREP_DOORBELL_REQUEST_AT,
	       FPREP_REQUEST_HEADER_SIZE);
	s->req = s->req_head;
	s->req_len = FPREP_REQUEST_HEADER_SIZE;
	s->req_msg = NULL;
	s->pipe = d->pipe;
	s->sink = (fprep__sink){.kind = FPREP__SINK_ENTRY,
	                        .region = d->region,
	                        .area = e + FPREP_DOORBELL_REPLY_AT};
	fprep__regions_use(d->region);
	db->requests++;
	fprep__slot_enter(s, FPREP__SLOT_RECV);
	db->port.take(s);
	return 1;
}

/* db_poll_one takes the POSTED requests of doorbell d, starting where its
 * last poll stopped so that no entry waits behind the others. Returns how
 * many it took, and in *full whether it had to stop. */
static unsigned db_poll_one(fprep__doorbells *db, fprep__doorbell *d, int *full)
{
	unsigned taken = 0;

	for (unsigned j = 0; j < d->entries; j++) {
		unsigned k = (d->next + j) % d->entries;
		int rv = db_take(db, d, db_entry(d, k));

		if (rv < 0) {
			d->next = k;
			*full = 1;
			return taken;
		}
		taken += (unsigned)rv;
	}
	return taken;
}

static unsigned db_poll(fprep__port *port)
{
	fprep__doorbells *db = (fprep__doorbells *)port;
	unsigned taken = 0;

	if (db->closed)
		return 0;
	db->deferred = 0;
	for (unsigned i = 0; i < db->nbells;) {
		fprep__doorbell *d = &db->bells[i];
		int full = 0;

		if (fprep__memreg_broken(d->region)) {
			db_drop(db, d);
			continue;
		}
		taken += db_poll_one(db, d, &full);
		if (db->nfree == 0)
			return taken;
		i++;
	}
	return taken;
}

static void db_spin(fprep__port *port, int on)
{
	fprep__doorbells *db = (fprep__doorbells *)port;

	if (db->polling == on || (on && db->closed))
		return;
	db->polling = on;
	/* Armed before polling = 0, cleared after polling = 1: a client
	 * that reads polling = 0 then finds its word armed, or uses nng
	 * (protocol.h). */
	if (!on)
		db_arm(db, 1);
	for (unsigned i = 0; i < db->nbells; i++)
		if (!fprep__memreg_broken(db->bells[i].region))
			atomic_store(db_word(db->bells[i].area), (uint32_t)on);
	if (on)
		db_arm(db, 0);
	db_publish(db);
}

static void db_end(fprep__port *port, fprep__slot *s)
{
	fprep__doorbells *db = (fprep__doorbells *)port;

	FPREP__ASSERT(s->sink.kind == FPREP__SINK_ENTRY);
	fprep__regions_unuse(&db->srv->regions, s->sink.region);
	s->sink.region = NULL;
	s->sink.area = NULL;
	fprep__slot_enter(s, FPREP__SLOT_IDLE);
	db->free[db->nfree++] = s;
	/* Entries left POSTED for want of a slot or of the connection's
	 * room are taken now, whether or not the loop spins. */
	if (db->deferred)
		(void)db_poll(port);
}

static void db_close(fprep__port *port)
{
	fprep__doorbells *db = (fprep__doorbells *)port;

	/* No request is taken from a doorbell any more: a client that
	 * posted one takes it back and sends it through nng, and gets the
	 * stop status there. */
	db_spin(port, 0);
	db->closed = 1;
	while (db->nbells > 0)
		db_drop(db, &db->bells[0]);
	uv_timer_stop(&db->mute_timer);
}

static const fprep__port_ops db_ops = {
        .poll = db_poll,
        .spin = db_spin,
        .end = db_end,
        .close = db_close,
};

/* db_mute_cb ends the mute of the doorbells whose time is up, arms their
 * words again while the loop sleeps, and looks at their entries. */
static void db_mute_cb(uv_timer_t *timer)
{
	fprep__doorbells *db = timer->data;
	uint64_t now = fprep__now_ns(), next = 0;

	for (unsigned i = 0; i < db->nbells; i++) {
		fprep__doorbell *d = &db->bells[i];

		if (!d->muted)
			continue;
		if (now >= d->muted_until_ns) {
			d->muted = 0;
			d->idle_rings = 0;
			if (!db->polling && db_armable(d))
				atomic_store(db_wake(d),
				             FPREP_DOORBELL_WAKE_ARMED);
		} else if (next == 0 || d->muted_until_ns < next) {
			next = d->muted_until_ns;
		}
	}
	if (next != 0)
		uv_timer_start(&db->mute_timer, db_mute_cb,
		               (next - now) / 1000000u + 1, 0);
	db_publish(db);
	(void)db_poll(&db->port);
}

/* db_idle_ring counts a ring of d that found nothing posted; a doorbell
 * rung too often so is muted (its word is left unarmed). */
static void db_idle_ring(fprep__doorbells *db, fprep__doorbell *d)
{
	uint64_t now = fprep__now_ns();
	uint64_t window = (uint64_t)DB_IDLE_WINDOW_MS * 1000000u;

	if (now - d->idle_since_ns > window) {
		d->idle_since_ns = now;
		d->idle_rings = 0;
	}
	if (++d->idle_rings < DB_IDLE_RINGS)
		return;
	db->mutes++;
	d->muted = 1;
	d->muted_until_ns = now + (uint64_t)DB_MUTE_MS * 1000000u;
	atomic_store(db_wake(d), 0);
	fprep__log(FPREP_LOG_INFO,
	           "doorbell of connection %" PRIu32 " (region %" PRIu32
	           "): %u rings without a request in %d ms: not armed for "
	           "%d ms",
	           d->pipe, d->region->id, d->idle_rings, DB_IDLE_WINDOW_MS,
	           DB_MUTE_MS);
	if (!uv_is_active((uv_handle_t *)&db->mute_timer))
		uv_timer_start(&db->mute_timer, db_mute_cb, DB_MUTE_MS, 0);
}

unsigned fprep__doorbells_rung(fprep__doorbells *db)
{
	unsigned taken = 0;

	atomic_store(&db->waker.queued, 0);
	db->rings++;
	if (db->closed)
		return 0;
	/* Which words rang is read before they are armed again. */
	for (unsigned i = 0; i < db->nbells; i++) {
		fprep__doorbell *d = &db->bells[i];

		d->rang = d->waked && !d->muted &&
		          !fprep__memreg_broken(d->region) &&
		          (atomic_load(db_wake(d)) & FPREP_DOORBELL_WAKE_RUNG);
	}
	/* No spin (--spin-us 0): RUNG is cleared before the entries are
	 * looked at, so a later ring is seen; then the waker sleeps again. */
	if (!db->polling)
		db_arm(db, 1);
	for (unsigned i = 0; i < db->nbells; i++) {
		fprep__doorbell *d = &db->bells[i];
		int full = 0;
		unsigned n;

		if (fprep__memreg_broken(d->region))
			continue;
		n = db_poll_one(db, d, &full);
		taken += n;
		if (n == 0 && !full && d->rang)
			db_idle_ring(db, d);
	}
	if (!db->polling)
		db_publish(db);
	return taken;
}

int fprep__doorbells_init(fprep__doorbells *db, fprep__server *srv,
                          fprep__slot *slots, unsigned n)
{
	const fprep__config *cfg = srv->cfg;

	db->port.ops = &db_ops;
	db->port.name = "doorbells";
	db->srv = srv;
	db->slots = slots;
	db->nslots = n;
	db->bells = calloc(cfg->max_doorbells + 1, sizeof(*db->bells));
	db->free = calloc(n + 1, sizeof(*db->free));
	if (db->bells == NULL || db->free == NULL)
		return FPREP_ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		slots[i].port = &db->port;
		db->free[db->nfree++] = &slots[i];
	}
	uv_timer_init(&srv->loop, &db->mute_timer);
	db->mute_timer.data = db;
	db->timer_open = 1;
	db->waker.ev.kind = FPREP__EV_DOORBELL;
	fprep__metrics_doorbells(0, cfg->max_doorbells);
	if (cfg->max_doorbells > 0)
		(void)fprep__waker_start(&db->waker, &srv->evq);
	return 0;
}

void fprep__doorbells_fini(fprep__doorbells *db)
{
	fprep__waker_stop(&db->waker);
	if (db->timer_open)
		uv_close((uv_handle_t *)&db->mute_timer, NULL);
	db->timer_open = 0;
	free(db->bells);
	free(db->free);
	db->bells = NULL;
	db->free = NULL;
	db->nbells = 0;
	db->nfree = 0;
}
