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
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "server_internal.h"

/* doorbell_word: the 32-bit atomic at offset off of the area. */
static _Atomic uint32_t *doorbell_word(uint8_t *p)
{
	return (_Atomic uint32_t *)(void *)p;
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
	if (!fprep__memreg_broken(d->region))
		atomic_store(doorbell_word(d->area), 0);
	fprep__regions_unuse(&srv->regions, d->region);
	*d = srv->doorbells[--srv->ndoorbells];
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
	fprep__regions_use(r);
	atomic_store(doorbell_word(d->area), (uint32_t)srv->polling);
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
	for (unsigned i = 0; i < srv->ndoorbells; i++)
		if (!fprep__memreg_broken(srv->doorbells[i].region))
			atomic_store(doorbell_word(srv->doorbells[i].area),
			             (uint32_t)on);
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
