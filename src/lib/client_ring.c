/*
 * client_ring.c: a ring of slots in one shared-memory region
 * (fprep_ring_*, frameprep/ring.h).
 *
 * The design is simple: a ring is a slot table (ring.c), an optional gate
 * and a list of registrations ("maps"), newest first; the newest is the
 * one requests go to. A lease names its slot's turn (the table's ticket)
 * and the map its bytes lie in. fprep_ring_send sends through the
 * region's route (fprep_region_request: the slot's doorbell entry or
 * nng) and waits for the reply in the slot.
 *
 * Re-registration: a request that finds its map stale (the connection it
 * was registered on closed, or the daemon answered FPREP_EREGION) calls
 * ring_recover with the epoch it read before sending. The first such
 * thread, under recover_mtx, raises the epoch, registers a new region and
 * makes it the newest map; the others find the epoch changed and only
 * send again. A reply read after the epoch changed may come from the old
 * region's daemon: it is dropped and the request sent again. Old maps are
 * unregistered at once and unmapped at fprep_ring_close (or, without a
 * word to the daemon, fprep_ring_forget), since leases and the program's
 * arrays may still read them.
 *
 * It uses only the library's public API (a client's route, regions and
 * doorbells), as a program of its own would; the C tools and the Python
 * package's Ring and AsyncRing (_native.CRing) are its users.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "frameprep/frameprep.h"
#include "frameprep/ring.h"

#define RING_PAGE     4096u
#define RING_ATTEMPTS 4
#define RING_RETRY_MS 20
#define RING_WAIT_MS  30000u

/* ring_map: one registration of the ring's memory. */
struct ring_map {
	fprep_region *region;
	uint8_t *base;
	uint64_t epoch;
	uint64_t lost; /* the client's lost connections when registered */
	int doorbell;  /* the daemon polls its doorbell area */
	struct ring_map *older;
};

struct fprep_ring {
	fprep_client *client;
	fprep_slots *table;
	fprep_gate *gate; /* not owned, or NULL */
	unsigned slots;
	unsigned timeout_ms;
	int doorbell;
	size_t frame_bytes, tensor_bytes;
	size_t out_capacity; /* tensor rounded to 8 + the reply header */
	size_t frame_off;    /* of the frame inside a slot */
	size_t slot_bytes;
	size_t db_off; /* the doorbell area, after the slots */
	unsigned db_entries;
	size_t size;
	/* The newest map and its epoch, read without a lock by senders (the
	 * epoch first: a re-registration raises it before it swaps the map). */
	_Atomic(struct ring_map *) map;
	atomic_uint_fast64_t epoch;
	atomic_int closed;
	pthread_mutex_t recover_mtx; /* one re-registration at a time; the
	                                map list */
};

/* ring_round rounds n up to whole pages, or returns 0 on overflow. */
static size_t ring_round(size_t n)
{
	return n > SIZE_MAX - (RING_PAGE - 1)
	               ? 0
	               : (n + RING_PAGE - 1) & ~(size_t)(RING_PAGE - 1);
}

/* ring_layout sets the slot layout of cfg; returns 0 or FPREP_EINVAL. */
static int ring_layout(fprep_ring *ring, const fprep_ring_config *cfg)
{
	size_t reply_off, frame, db = 0;

	if (cfg->slots == 0 || cfg->frame_bytes == 0 ||
	    cfg->tensor_bytes == 0 || cfg->tensor_bytes > SIZE_MAX / 2 ||
	    cfg->frame_bytes > SIZE_MAX / 2)
		return FPREP_EINVAL;
	reply_off = (cfg->tensor_bytes + 7) & ~(size_t)7;
	ring->out_capacity = reply_off + FPREP_REPLY_HEADER_SIZE;
	ring->frame_off = ring_round(ring->out_capacity);
	frame = ring_round(cfg->frame_bytes);
	if (ring->frame_off == 0 || frame == 0 ||
	    ring->frame_off > SIZE_MAX - frame)
		return FPREP_EINVAL;
	ring->slot_bytes = ring->frame_off + frame;
	if (__builtin_mul_overflow(ring->slot_bytes, (size_t)cfg->slots,
	                           &ring->size))
		return FPREP_EINVAL;
	if (cfg->doorbell) {
		ring->db_entries = cfg->slots < FPREP_DOORBELL_ENTRIES_MAX
		                           ? cfg->slots
		                           : FPREP_DOORBELL_ENTRIES_MAX;
		db = ring_round(FPREP_DOORBELL_HEADER_SIZE +
		                (size_t)FPREP_DOORBELL_ENTRY_SIZE *
		                        ring->db_entries);
		ring->db_off = ring->size;
		if (ring->size > SIZE_MAX - db)
			return FPREP_EINVAL;
		ring->size += db;
	}
	ring->slots = cfg->slots;
	ring->frame_bytes = cfg->frame_bytes;
	ring->tensor_bytes = cfg->tensor_bytes;
	ring->doorbell = cfg->doorbell != 0;
	return 0;
}

/* ring_register opens and registers a new region for epoch and asks the
 * daemon to poll its doorbell area; *mp is its map. */
static int ring_register(fprep_ring *ring, uint64_t epoch, struct ring_map **mp)
{
	struct ring_map *m;
	int err;

	*mp = NULL;
	m = calloc(1, sizeof(*m));
	if (m == NULL)
		return FPREP_ENOMEM;
	m->lost = fprep_client_conn_lost(ring->client);
	err = fprep_region_open(&m->region, ring->client, ring->size);
	if (err) {
		free(m);
		return err;
	}
	m->base = fprep_region_base(m->region);
	m->epoch = epoch;
	/* A daemon that refuses (doorbells off, at its limit) leaves the
	 * ring on nng. */
	if (ring->db_entries != 0)
		m->doorbell = fprep_region_doorbell(m->region, ring->db_off,
		                                    ring->db_entries) == 0;
	*mp = m;
	return 0;
}

int fprep_ring_open(fprep_ring **rp, fprep_client *client,
                    const fprep_ring_config *cfg)
{
	struct ring_map *m;
	fprep_ring *ring;
	int err;

	*rp = NULL;
	ring = calloc(1, sizeof(*ring));
	if (ring == NULL)
		return FPREP_ENOMEM;
	if ((err = ring_layout(ring, cfg)) != 0)
		goto err_alloc;
	ring->client = client;
	ring->gate = cfg->gate;
	ring->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : RING_WAIT_MS;
	if ((err = fprep_slots_alloc(&ring->table, cfg->slots)) != 0)
		goto err_alloc;
	if ((err = ring_register(ring, 0, &m)) != 0)
		goto err_table;
	atomic_init(&ring->map, m);
	atomic_init(&ring->epoch, 0);
	atomic_init(&ring->closed, 0);
	pthread_mutex_init(&ring->recover_mtx, NULL);
	*rp = ring;
	return 0;

err_table:
	fprep_slots_free(ring->table);
err_alloc:
	free(ring);
	return err;
}

void fprep_ring_unregister(fprep_ring *ring)
{
	struct ring_map *m;

	if (atomic_exchange(&ring->closed, 1))
		return;
	fprep_slots_close(ring->table);
	/* A re-registration under way sees closed and unregisters what it
	 * made; the maps it left are unregistered here. */
	pthread_mutex_lock(&ring->recover_mtx);
	for (m = atomic_load(&ring->map); m != NULL; m = m->older)
		fprep_region_unregister(m->region);
	pthread_mutex_unlock(&ring->recover_mtx);
}

/* ring_free frees ring and its maps, each region closed or (forget)
 * forgotten. */
static void ring_free(fprep_ring *ring, int forget)
{
	struct ring_map *m, *older;

	for (m = atomic_load(&ring->map); m != NULL; m = older) {
		older = m->older;
		if (forget)
			fprep_region_forget(m->region);
		else
			fprep_region_close(m->region);
		free(m);
	}
	pthread_mutex_destroy(&ring->recover_mtx);
	fprep_slots_free(ring->table);
	free(ring);
}

void fprep_ring_close(fprep_ring *ring)
{
	if (ring == NULL)
		return;
	fprep_ring_unregister(ring);
	ring_free(ring, 0);
}

void fprep_ring_forget(fprep_ring *ring)
{
	if (ring != NULL)
		ring_free(ring, 1);
}

unsigned fprep_ring_slots(const fprep_ring *ring)
{
	return ring->slots;
}

fprep_slots *fprep_ring_table(fprep_ring *ring)
{
	return ring->table;
}

size_t fprep_ring_size(const fprep_ring *ring)
{
	return ring->size;
}

size_t fprep_ring_out_capacity(const fprep_ring *ring)
{
	return ring->out_capacity;
}

uint64_t fprep_ring_epoch(fprep_ring *ring)
{
	return atomic_load(&ring->epoch);
}

uint32_t fprep_ring_region_id(fprep_ring *ring)
{
	return fprep_region_id(atomic_load(&ring->map)->region);
}

int fprep_ring_doorbell(fprep_ring *ring)
{
	return atomic_load(&ring->map)->doorbell;
}

void *fprep_ring_frame(fprep_ring *ring, unsigned k)
{
	if (k >= ring->slots)
		return NULL;
	return atomic_load(&ring->map)->base + (size_t)k * ring->slot_bytes +
	       ring->frame_off;
}

const void *fprep_ring_tensor(fprep_ring *ring, unsigned k)
{
	if (k >= ring->slots)
		return NULL;
	return atomic_load(&ring->map)->base + (size_t)k * ring->slot_bytes;
}

/* ring_map_of returns the map of epoch (the newest when none is older). */
static struct ring_map *ring_map_of(fprep_ring *ring, uint64_t epoch)
{
	struct ring_map *m = atomic_load(&ring->map);

	/* Maps only join at the head: the list behind it never changes. */
	while (m->epoch > epoch && m->older != NULL)
		m = m->older;
	return m;
}

uint8_t *fprep_ring_lease_frame(fprep_ring *ring, const fprep_ring_lease *lease)
{
	return ring_map_of(ring, lease->epoch)->base +
	       (size_t)lease->slot * ring->slot_bytes + ring->frame_off;
}

const uint8_t *fprep_ring_lease_tensor(fprep_ring *ring,
                                       const fprep_ring_lease *lease)
{
	return ring_map_of(ring, lease->epoch)->base +
	       (size_t)lease->slot * ring->slot_bytes;
}

int fprep_ring_take(fprep_ring *ring, int state, unsigned long holder, int mine,
                    unsigned timeout_ms, fprep_ring_lease *lease)
{
	/* The map its frame is written in: a newer one gets a copy. */
	lease->epoch = atomic_load(&ring->map)->epoch;
	return fprep_slots_take(ring->table, state, holder, mine, timeout_ms,
	                        &lease->slot, &lease->ticket);
}

int fprep_ring_claim(fprep_ring *ring, const fprep_ring_lease *lease)
{
	return fprep_slots_step(ring->table, lease->slot, lease->ticket,
	                        FPREP_SLOT_RESERVED, FPREP_SLOT_TAKEN, 0);
}

int fprep_ring_hold(fprep_ring *ring, const fprep_ring_lease *lease,
                    unsigned long holder)
{
	return fprep_slots_step(ring->table, lease->slot, lease->ticket,
	                        FPREP_SLOT_TAKEN, FPREP_SLOT_HELD, holder);
}

int fprep_ring_release(fprep_ring *ring, const fprep_ring_lease *lease)
{
	return fprep_slots_release(ring->table, lease->slot, lease->ticket, 0);
}

int fprep_ring_cancel(fprep_ring *ring, const fprep_ring_lease *lease)
{
	return fprep_slots_release(ring->table, lease->slot, lease->ticket, 1);
}

/* ring_sleep_ms sleeps ms milliseconds. */
static void ring_sleep_ms(unsigned ms)
{
	struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&t, NULL);
}

/* ring_now_ms returns the monotonic clock in milliseconds. */
static uint64_t ring_now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

/* ring_retryable says whether a failed registration is worth retrying:
 * the daemon is away, restarting or busy. */
static int ring_retryable(int err)
{
	return err == FPREP_ETRANSPORT || err == FPREP_ETIMEDOUT ||
	       err == FPREP_EREGION || err == FPREP_ESHUTDOWN ||
	       err == FPREP_EBUSY;
}

/* ring_recover registers the ring anew after the daemon forgot the map
 * of epoch, unless another thread did since; retries for up to the ring's
 * timeout while the daemon is away. Returns 0 or the last error. */
static int ring_recover(fprep_ring *ring, uint64_t epoch)
{
	struct ring_map *m = NULL, *old;
	uint64_t deadline;
	int err = 0;

	pthread_mutex_lock(&ring->recover_mtx);
	if (atomic_load(&ring->epoch) != epoch || atomic_load(&ring->closed))
		goto out;
	/* Raised first: a reply read from now on is not taken. */
	atomic_store(&ring->epoch, epoch + 1);
	deadline = ring_now_ms() + ring->timeout_ms;
	while ((err = ring_register(ring, epoch + 1, &m)) != 0) {
		if (!ring_retryable(err) || ring_now_ms() > deadline ||
		    atomic_load(&ring->closed))
			goto out;
		ring_sleep_ms(RING_RETRY_MS);
	}
	old = atomic_load(&ring->map);
	m->older = old;
	atomic_store(&ring->map, m);
	/* Unregistered unless its connection is gone (the library sends
	 * nothing then); still mapped for the leases reading it. */
	fprep_region_unregister(old->region);
	if (atomic_load(&ring->closed))
		fprep_region_unregister(m->region);
out:
	pthread_mutex_unlock(&ring->recover_mtx);
	return err;
}

/* ring_current returns the newest map, once no re-registration runs, and
 * its epoch in *epoch. */
static struct ring_map *ring_current(fprep_ring *ring, uint64_t *epoch)
{
	struct ring_map *m;

	for (;;) {
		*epoch = atomic_load(&ring->epoch);
		m = atomic_load(&ring->map);
		if (m->epoch == *epoch)
			return m;
		/* A re-registration is under way: wait for its end. */
		pthread_mutex_lock(&ring->recover_mtx);
		pthread_mutex_unlock(&ring->recover_mtx);
		if (atomic_load(&ring->epoch) == *epoch &&
		    atomic_load(&ring->map)->epoch != *epoch)
			return NULL; /* it failed: the caller tries again */
	}
}

/* ring_post sends req for slot k of map m, taking a gate token. */
static int ring_post(fprep_ring *ring, struct ring_map *m, unsigned k,
                     uint64_t frame_offset, fprep_request *req,
                     fprep_result *res)
{
	uint64_t slot = (uint64_t)k * ring->slot_bytes;
	int err;

	fprep_request_set_shm(req, m->region,
	                      slot + ring->frame_off + frame_offset, m->region,
	                      slot, ring->out_capacity);
	req->shm_reply = 1;
	if (ring->gate != NULL &&
	    !fprep_gate_take(ring->gate, ring->timeout_ms))
		return FPREP_ETIMEDOUT;
	err = fprep_region_request(m->region, k, req, res);
	if (ring->gate != NULL)
		fprep_gate_give(ring->gate);
	return err;
}

int fprep_ring_send(fprep_ring *ring, fprep_ring_lease *lease,
                    fprep_request *req, uint64_t frame_offset,
                    fprep_result *res)
{
	struct ring_map *m;
	uint64_t epoch;
	uint8_t *from;
	int err = FPREP_EREGION;

	memset(res, 0, sizeof(*res));
	if (atomic_load(&ring->closed))
		return FPREP_ECLOSED;
	/* The lease's turn, taken (a step to where it is changes nothing). */
	if (frame_offset > ring->frame_bytes ||
	    req->input_size > ring->frame_bytes - frame_offset ||
	    !fprep_slots_step(ring->table, lease->slot, lease->ticket,
	                      FPREP_SLOT_TAKEN, FPREP_SLOT_TAKEN, 0))
		return FPREP_EINVAL;
	for (int attempt = 0; attempt < RING_ATTEMPTS; attempt++) {
		if (atomic_load(&ring->closed))
			return FPREP_ECLOSED;
		if ((m = ring_current(ring, &epoch)) == NULL) {
			err = FPREP_EREGION;
			if (ring_recover(ring, epoch) != 0)
				return FPREP_EREGION;
			continue;
		}
		if (m->epoch != lease->epoch) {
			/* Written before a restart: its bytes are in the old
			 * memory, complete now that they are sent. */
			from = fprep_ring_lease_frame(ring, lease);
			memcpy(m->base +
			               (size_t)lease->slot * ring->slot_bytes +
			               ring->frame_off + frame_offset,
			       from + frame_offset, req->input_size);
			lease->epoch = m->epoch;
		}
		err = ring_post(ring, m, lease->slot, frame_offset, req, res);
		if (err) {
			/* A transport error is the daemon's death when the
			 * connection was lost; else it is the caller's. */
			if (attempt + 1 == RING_ATTEMPTS ||
			    (err != FPREP_EREGION &&
			     (err != FPREP_ETRANSPORT ||
			      fprep_client_conn_lost(ring->client) == m->lost)))
				return err;
			if (ring_recover(ring, epoch) != 0)
				return err;
			continue;
		}
		if (atomic_load(&ring->epoch) != epoch) {
			fprep_result_fini(
			        res); /* answered after a restart began */
			continue;
		}
		if (res->header.status == FPREP_EREGION &&
		    attempt + 1 < RING_ATTEMPTS) {
			fprep_result_fini(res);
			if ((err = ring_recover(ring, epoch)) != 0)
				return err;
			continue;
		}
		return 0;
	}
	return FPREP_EREGION;
}

int fprep_ring_submit(fprep_ring *ring, unsigned k, fprep_request *req,
                      fprep_done_fn cb, void *arg, fprep_pending **pp)
{
	struct ring_map *m = atomic_load(&ring->map);
	uint32_t shape[4];
	uint64_t tensor, slot;

	*pp = NULL;
	if (k >= ring->slots || req->input_size > ring->frame_bytes ||
	    fprep_tensor_shape(req, shape, &tensor) != 0 ||
	    tensor > ring->tensor_bytes)
		return FPREP_EINVAL;
	slot = (uint64_t)k * ring->slot_bytes;
	fprep_request_set_shm(req, m->region, slot + ring->frame_off, m->region,
	                      slot, ring->tensor_bytes);
	return fprep_client_submit(ring->client, req, NULL, cb, arg, pp);
}
