/*
 * client_doorbell.c: the doorbell carrier (carrier.h): a request whose
 * frame and tensor are in regions, posted in a doorbell entry in the
 * client's shared memory (protocol.h, "Doorbells") and answered there.
 *
 * The design is simple: the caller writes the request header into the
 * entry, stores POSTED and rings the daemon's wake word when its loop
 * sleeps; it then polls the entry's reply for up to the client's spin
 * time and sleeps in futex(2) after that, in 1 ms steps, so that it sees
 * the daemon stop watching or the connection close. An entry the daemon
 * did not take (it does not watch, or stopped before it took it) is taken
 * back and the request goes through nng with the same id; one taken and
 * never answered is given up. Two areas are served: the client's own (one
 * entry, db_busy, set up by client.c once per connection; staged calls
 * use it, and the caller's requests when the program asked for it) and a
 * region's (fprep_region_request, the entry the caller names). Which
 * requests may come this way is fprep_doorbell_check's (rules.c), the
 * daemon's rule too.
 */
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/supplemental/util/platform.h>

#include "carrier.h"
#include "client_conn.h"
#include "client_entry.h"

/* What client_doorbell_call returns when the daemon did not take the
 * request: it goes through nng instead. */
#define CLIENT_DOORBELL_NOT_TAKEN (-1)

/* client_doorbell_fits tells whether req may go through the client's
 * doorbell: it has one, and req may come through a doorbell
 * (fprep_doorbell_check). */
static int client_doorbell_fits(fprep_client *c, const fprep_request *req)
{
	return atomic_load_explicit(&c->db_area, memory_order_acquire) !=
	               NULL &&
	       fprep_doorbell_check(req, NULL, 0) == FPREP_OK;
}

/* fprep__client_doorbell_hold takes the doorbell's entry (db_busy), waiting for
 * the call that holds it: it ends with its reply, its timeout or the
 * connection's loss. */
void fprep__client_doorbell_hold(fprep_client *c)
{
	const struct timespec pause = {0, 100000};

	while (atomic_flag_test_and_set(&c->db_busy))
		nanosleep(&pause, NULL);
}

/* client_doorbell_watched tells whether the daemon watches the doorbell
 * area: it polls it, or its waker sleeps on the wake word (protocol.h). */
static int client_doorbell_watched(_Atomic uint32_t *polling,
                                   _Atomic uint32_t *wake)
{
	return atomic_load(polling) != 0 ||
	       (atomic_load(wake) & FPREP_DOORBELL_WAKE_ARMED) != 0;
}

/* client_doorbell_call posts the request header hdr (request id) in entry
 * k of the doorbell area db (which the caller holds alone) when the
 * daemon watches it (polls it, or sleeps on its wake word, which is then
 * rung), and waits there for the reply until deadline: polling for up to
 * spin_us, then in futex(2) with a 1 ms bound, so that it sees the daemon
 * stop watching, and the connection close (c->conn_lost no longer lost:
 * the daemon died). Returns 0 with the reply header copied into reply
 * (FPREP_REPLY_HEADER_SIZE bytes);
 * CLIENT_DOORBELL_NOT_TAKEN when the daemon did not watch, or stopped
 * before it took the request (the entry is the client's again);
 * FPREP_ETIMEDOUT (taken, never answered: the caller leaves the area
 * alone from then on); FPREP_ETRANSPORT (the connection closed). */
static int client_doorbell_call(fprep_client *c, uint8_t *db, unsigned k,
                                const uint8_t *hdr, uint64_t id,
                                nng_time deadline, uint64_t lost,
                                uint8_t *reply)
{
	long limit_us = (long)fprep__client_left(deadline) * 1000;
	uint8_t *e = db + FPREP_DOORBELL_HEADER_SIZE +
	             (size_t)k * FPREP_DOORBELL_ENTRY_SIZE;
	_Atomic uint32_t *polling = (_Atomic uint32_t *)(void *)db;
	_Atomic uint32_t *wake =
	        (_Atomic uint32_t *)(void *)(db + FPREP_DOORBELL_WAKE_AT);
	unsigned spin_us =
	        atomic_load_explicit(&c->spin_us, memory_order_relaxed);
	_Atomic uint32_t *state = (_Atomic uint32_t *)(void *)e;
	_Atomic uint64_t *word =
	        (_Atomic uint64_t *)(void *)(e + FPREP_DOORBELL_REPLY_AT + 8);
	const struct timespec tick = {0, 1000000};
	struct timespec t0, t;
	long waited_us;
	uint64_t v;
	unsigned i;

	if (!client_doorbell_watched(polling, wake))
		return CLIENT_DOORBELL_NOT_TAKEN;
	memcpy(e + FPREP_DOORBELL_REQUEST_AT, hdr, FPREP_REQUEST_HEADER_SIZE);
	atomic_store_explicit(word, 0, memory_order_relaxed);
	atomic_store(state, FPREP_DOORBELL_POSTED);
	/* The daemon sleeps: ring, and its waker wakes the loop. */
	if (atomic_load(polling) == 0 &&
	    (atomic_fetch_or(wake, FPREP_DOORBELL_WAKE_RUNG) &
	     FPREP_DOORBELL_WAKE_ARMED) != 0)
		syscall(SYS_futex, (uint32_t *)(void *)wake, FUTEX_WAKE, 1,
		        NULL, NULL, 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 1;; i++) {
		v = atomic_load_explicit(word, memory_order_acquire);
		if (v == id)
			break;
		if (i % 64 != 0)
			continue;
		/* Not taken while the daemon does not watch, or too long:
		 * take the entry back, unless the daemon has it. */
		clock_gettime(CLOCK_MONOTONIC, &t);
		waited_us = (t.tv_sec - t0.tv_sec) * 1000000 +
		            (t.tv_nsec - t0.tv_nsec) / 1000;
		if (atomic_load(state) == FPREP_DOORBELL_POSTED &&
		    (!client_doorbell_watched(polling, wake) ||
		     waited_us >= limit_us)) {
			uint32_t posted = FPREP_DOORBELL_POSTED;

			if (atomic_compare_exchange_strong(state, &posted,
			                                   FPREP_DOORBELL_FREE))
				return CLIENT_DOORBELL_NOT_TAKEN;
		}
		if (atomic_load(&c->conn_lost) != lost)
			return fprep__client_error(
			        c, FPREP_ETRANSPORT,
			        "the connection to the daemon closed "
			        "while a request waited in its "
			        "doorbell");
		if (waited_us >= limit_us) {
			/* Taken and never answered: the caller leaves the
			 * doorbell alone from now on. */
			return fprep__client_error(
			        c, FPREP_ETIMEDOUT,
			        "no reply in the doorbell: timed "
			        "out after %d ms",
			        c->timeout_ms);
		}
		if (waited_us >= (long)spin_us)
			syscall(SYS_futex, (uint32_t *)(void *)word, FUTEX_WAIT,
			        (uint32_t)v, &tick, NULL, 0);
	}
	memcpy(reply, e + FPREP_DOORBELL_REPLY_AT, FPREP_REPLY_HEADER_SIZE);
	return 0;
}

/* A doorbell reply's payload: none (the tensor went to a region), so that
 * its result owns nothing. */
static const uint8_t client_no_payload[1];

/* client_check_entry_reply checks hdr, a reply header read from a
 * doorbell entry, as the answer to the request request_id of kind kind
 * and stores it in *res, which then owns nothing: an entry's reply has
 * no payload. */
static int client_check_entry_reply(fprep_client *c, uint64_t request_id,
                                    uint16_t kind, const uint8_t *hdr,
                                    fprep_result *res)
{
	int err;

	if ((err = fprep_reply_decode(hdr, FPREP_REPLY_HEADER_SIZE,
	                              &res->header))) {
		err = fprep__client_error(
		        c, err, "unreadable reply in the doorbell (%s)",
		        fprep_err_name(err));
		goto err_reply;
	}
	if ((err = fprep__client_check_ids(c, request_id, kind, &res->header)))
		goto err_reply;
	if (res->header.payload_size != 0) {
		err = fprep__client_error(
		        c, FPREP_EPROTO,
		        "a reply in the doorbell says it has %llu "
		        "bytes of payload: it can have none",
		        (unsigned long long)res->header.payload_size);
		goto err_reply;
	}
	fprep__client_note_status(c, &res->header);
	res->payload = client_no_payload;
	res->payload_size = 0;
	res->priv = NULL;
	return FPREP_OK;

err_reply:
	memset(res, 0, sizeof(*res));
	return err;
}

/* client_call_doorbell posts head, req's encoded header, in the client's
 * doorbell when req fits it, no other call holds its entry, and the
 * doorbell serves it (any request when the program set it up, a staged
 * one when the client did): returns what client_doorbell_call does, the
 * reply header in reply. */
static int client_call_doorbell(fprep_client *c, const fprep_request *req,
                                int staged, const uint8_t *head,
                                nng_time deadline, uint8_t *reply)
{
	uint8_t *db;
	int err = CLIENT_DOORBELL_NOT_TAKEN;

	if (!client_doorbell_fits(c, req) ||
	    (!staged &&
	     atomic_load_explicit(&c->db_mode, memory_order_relaxed) !=
	             FPREP__DB_ON) ||
	    atomic_flag_test_and_set(&c->db_busy))
		return CLIENT_DOORBELL_NOT_TAKEN;
	db = atomic_load_explicit(&c->db_area, memory_order_acquire);
	/* Not after its connection's loss: its daemon is gone, and may
	 * have left the area saying it polls. */
	if (db != NULL &&
	    atomic_load(&c->db_lost) == atomic_load(&c->conn_lost))
		err = client_doorbell_call(c, db, 0, head, req->request_id,
		                           deadline, atomic_load(&c->db_lost),
		                           reply);
	if (err == FPREP_ETIMEDOUT)
		atomic_store(&c->db_area, NULL);
	atomic_flag_clear(&c->db_busy);
	return err;
}

/* doorbell_through_nng sends head, wire's encoded header, and its
 * inline frame (payload_size bytes at payload) through nng, as the
 * daemon did not take it through a doorbell: the same request id, the
 * reply in the output region when wire asks (area, found first). */
static int doorbell_through_nng(fprep_client *c, const fprep_request *wire,
                                const uint8_t *head, const void *payload,
                                size_t payload_size, uint8_t *area,
                                nng_time deadline, fprep_result *res)
{
	nng_msg *msg;
	int err;

	if ((err = fprep__client_message(c, head, payload, payload_size, &msg)))
		return err;
	return fprep__client_exchange(c, msg, area, wire->request_id,
	                              wire->kind, deadline, res);
}

int fprep__carrier_region_wait(fprep_client *c, fprep__call *call,
                               fprep_result *res)
{
	nng_time deadline = fprep__client_deadline(c);
	uint8_t head[FPREP_REQUEST_HEADER_SIZE], entry[FPREP_REPLY_HEADER_SIZE];
	uint8_t *area = NULL;
	int err;

	if (call->wire.shm_reply &&
	    (area = fprep__client_reply_area(c, &call->wire)) == NULL)
		return FPREP_EINVAL;
	/* The header once: through the doorbell no message is made. */
	fprep_request_encode(&call->wire, head);
	err = client_call_doorbell(c, &call->wire, call->staged, head, deadline,
	                           entry);
	if (err == 0)
		return client_check_entry_reply(c, call->wire.request_id,
		                                call->wire.kind, entry, res);
	if (err != CLIENT_DOORBELL_NOT_TAKEN)
		return err;
	return doorbell_through_nng(c, &call->wire, head, call->payload,
	                            call->payload_size, area, deadline, res);
}

/* doorbell_fits: a request of the caller's own, in regions, when the
 * program set the doorbell up (fprep_client_doorbell); a staged one is
 * the stage carrier's. */
static int doorbell_fits(fprep_client *c, const fprep_request *req)
{
	return atomic_load_explicit(&c->db_mode, memory_order_relaxed) ==
	               FPREP__DB_ON &&
	       client_doorbell_fits(c, req);
}

/* doorbell_post: the request header is posted by the wait. */
static int doorbell_post(fprep_client *c, fprep__call *call)
{
	(void)c;
	(void)call;
	return FPREP_OK;
}

const fprep__carrier fprep__carrier_doorbell = {
        .name = "doorbell",
        .fits = doorbell_fits,
        .post = doorbell_post,
        .wait = fprep__carrier_region_wait,
        .release = NULL,
};

int fprep__client_call_entry(fprep_client *c, uint8_t *db, unsigned k,
                             uint64_t lost, fprep_request *req,
                             fprep_result *res)
{
	nng_time deadline = fprep__client_deadline(c);
	uint8_t head[FPREP_REQUEST_HEADER_SIZE], entry[FPREP_REPLY_HEADER_SIZE];
	uint8_t *area = NULL;
	fprep__call call;
	int err;

	memset(res, 0, sizeof(*res));
	fprep__client_error_clear(c);
	if (fprep__client_forked(c))
		return fprep__client_forked_error(c);
	fprep__client_request_id(c, req);
	if (db == NULL || req->input_loc == FPREP_LOC_INLINE ||
	    req->output_loc == FPREP_LOC_INLINE) {
		/* Not this entry's: as fprep_client_request sends it. */
		memset(&call, 0, sizeof(call));
		call.req = req;
		call.wire = *req;
		return fprep__carrier_region_wait(c, &call, res);
	}
	/* Through the doorbell without a message: the header is posted from
	 * here, and the reply read into entry. */
	fprep_request_encode(req, head);
	err = client_doorbell_call(c, db, k, head, req->request_id, deadline,
	                           lost, entry);
	if (err == 0)
		return client_check_entry_reply(c, req->request_id, req->kind,
		                                entry, res);
	if (err != CLIENT_DOORBELL_NOT_TAKEN)
		return err;
	/* Not watched: through nng, with the same request id. */
	if (req->shm_reply && (area = fprep__client_reply_area(c, req)) == NULL)
		return FPREP_EINVAL;
	return doorbell_through_nng(c, req, head, NULL, 0, area, deadline, res);
}
