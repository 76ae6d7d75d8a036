/*
 * client_nng.c: the nng carrier (carrier.h): requests and their replies
 * through the client's socket, and the asynchronous API.
 *
 * Each request goes through an nng context with its own aio: a blocking
 * call takes a call slot (a context, its aios and its wait for a reply in
 * shared memory) from the client's pool, created on demand up to
 * FPREP_CLIENT_MAX_CALLS and reused, so several threads may make blocking
 * calls on one client at once, and the asynchronous, pipelined API (one
 * context and aio per request in flight) sits beside them on the same
 * socket. A reply is kept in the nng message it arrived in; the result's
 * payload points into it, so a tensor is never copied. A reply the daemon
 * writes into the client's shared memory (shm_reply) is waited for on the
 * futex of its header, the slot's receive beside it in case nng's answer
 * (an error) comes first. The other carriers send through here when the
 * daemon does not take a request their way; the results of all of them
 * end in fprep_result_fini, which hands a held object back to its carrier.
 */
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/supplemental/util/platform.h>

#include "carrier.h"
#include "client_conn.h"

/* The deadline of the calling thread's fprep_client_request, which the
 * requests it makes on the way share (serial: its client's, 0: none). */
static _Thread_local struct {
	uint64_t serial;
	nng_time deadline;
} client_outer;

/* client_slot: what one blocking call uses, the whole call long: its own
 * nng context, the aio of its send and receive, and the receive of a
 * reply that comes in shared memory (raio) with its wait. Created on
 * demand, up to FPREP_CLIENT_MAX_CALLS, and kept for the next call. */
struct fprep__client_slot {
	fprep_client *c;
	nng_ctx ctx;
	nng_aio *aio;
	nng_aio *raio;                /* the reply's receive, with a callback */
	_Atomic uint64_t *reply_word; /* request_id of the awaited header */
	uint64_t reply_id;            /* the awaited request's id */
	_Atomic int reply_state;      /* CLIENT_WAIT_* */
	int raio_busy;                /* raio cancelled, not yet waited for */
	struct fprep__client_slot *next; /* in the free list */
};

/* A call slot's wait for a reply in shared memory: the caller sets
 * WAITING before it posts the receive and leaves it for IDLE (a CAS) when
 * the header arrived; the receive's callback takes WAITING to NNG (a CAS)
 * before it touches the header's memory, so it never touches a header
 * whose caller has left. */
enum { CLIENT_WAIT_IDLE, CLIENT_WAIT_WAITING, CLIENT_WAIT_NNG };

/* client_shm: a shared-memory region this client registered, on its
 * connection gen. */
struct fprep__client_shm {
	uint32_t id;
	uint8_t *base;
	size_t size;
	uint64_t gen;
};

static void client_reply_cb(void *arg);
static void client_raio_retire(struct fprep__client_slot *s);

/* What the reply aio's callback stores in the awaited request_id when nng
 * delivered the reply (or failed) first: no request has this id. */
#define CLIENT_REPLY_VIA_NNG UINT64_MAX

/* client_slot_new makes a call slot of c, or returns an nng error. Under
 * slot_mtx. */
static int client_slot_new(fprep_client *c, struct fprep__client_slot **sp)
{
	struct fprep__client_slot *s = calloc(1, sizeof(*s));
	int rv;

	if (s == NULL)
		return NNG_ENOMEM;
	s->c = c;
	if ((rv = nng_ctx_open(&s->ctx, c->sock)) != 0)
		goto err_free;
	/* Each step's aio carries what is left of the call's time; these
	 * bound a step given no time of its own. */
	if ((rv = nng_ctx_set_ms(s->ctx, NNG_OPT_SENDTIMEO, c->timeout_ms)) !=
	            0 ||
	    (rv = nng_ctx_set_ms(s->ctx, NNG_OPT_RECVTIMEO, c->timeout_ms)) !=
	            0)
		goto err_ctx;
	if ((rv = nng_aio_alloc(&s->aio, NULL, NULL)) != 0)
		goto err_ctx;
	if ((rv = nng_aio_alloc(&s->raio, client_reply_cb, s)) != 0)
		goto err_aio;
	c->slots[c->nslots++] = s;
	*sp = s;
	return 0;

err_aio:
	nng_aio_free(s->aio);
err_ctx:
	nng_ctx_close(s->ctx);
err_free:
	free(s);
	return rv;
}

/* client_slot_get takes a free call slot of c for one blocking call into
 * *sp, making one while fewer than FPREP_CLIENT_MAX_CALLS exist, else
 * waiting for one until deadline. Returns 0, or FPREP_ETIMEDOUT or
 * FPREP_ENOMEM, recorded. */
static int client_slot_get(fprep_client *c, nng_time deadline,
                           struct fprep__client_slot **sp)
{
	int rv = 0;

	pthread_mutex_lock(&c->slot_mtx);
	while (c->free_slots == NULL && rv == 0) {
		if (c->nslots < FPREP_CLIENT_MAX_CALLS) {
			rv = client_slot_new(c, &c->free_slots);
			break;
		}
		if (!fprep__client_cond_wait(&c->slot_cv, &c->slot_mtx,
		                             deadline))
			rv = NNG_ETIMEDOUT;
	}
	if (rv == 0) {
		*sp = c->free_slots;
		c->free_slots = (*sp)->next;
	}
	pthread_mutex_unlock(&c->slot_mtx);
	if (rv == NNG_ETIMEDOUT)
		return fprep__client_error(
		        c, FPREP_ETIMEDOUT,
		        "timed out after %d ms waiting for one of "
		        "the client's %d calls in flight to end",
		        c->timeout_ms, FPREP_CLIENT_MAX_CALLS);
	if (rv != 0)
		return fprep__client_error(
		        c, fprep__client_nng_err(rv),
		        "opening a context: %s (nng error %d)",
		        nng_strerror(rv), rv);
	return 0;
}

/* client_slot_put gives s back to its client's free slots. */
static void client_slot_put(struct fprep__client_slot *s)
{
	fprep_client *c = s->c;

	pthread_mutex_lock(&c->slot_mtx);
	s->next = c->free_slots;
	c->free_slots = s;
	pthread_cond_signal(&c->slot_cv);
	pthread_mutex_unlock(&c->slot_mtx);
}

void fprep_result_fini(fprep_result *res)
{
	if ((uintptr_t)res->priv & FPREP__RESULT_HELD) {
		/* A carrier's object, its carrier first (carrier.h). */
		void *hold = (void *)((uintptr_t)res->priv &
		                      ~(uintptr_t)FPREP__RESULT_HELD);

		(*(const fprep__carrier *const *)hold)->release(hold);
	} else if (res->priv != NULL)
		nng_msg_free(res->priv);
	memset(res, 0, sizeof(*res));
}

/* client_step_error records the nng error rv of a step of a call (what
 * names it) and returns its enum fprep_err. */
static int client_step_error(fprep_client *c, int rv, const char *what)
{
	if (rv == NNG_ETIMEDOUT)
		return fprep__client_error(c, FPREP_ETIMEDOUT,
		                           "%s: timed out after %d ms", what,
		                           c->timeout_ms);
	return fprep__client_error(c, fprep__client_nng_err(rv),
	                           "%s: %s (nng error %d)", what,
	                           nng_strerror(rv), rv);
}

/* fprep__client_left is what is left of the call's time until deadline for
 * the next step (at least 1 ms: nng takes 0 as "now"). */
nng_duration fprep__client_left(nng_time deadline)
{
	nng_time now = nng_clock();

	return now >= deadline ? 1 : (nng_duration)(deadline - now);
}

/* fprep__client_deadline is when a call on c that starts now must end: the
 * client's timeout from now, or the deadline of the fprep_client_request
 * it is part of. */
int fprep__client_outer_begin(fprep_client *c)
{
	if (client_outer.serial != 0)
		return 0;
	client_outer.serial = c->serial;
	client_outer.deadline = nng_clock() + (nng_time)c->timeout_ms;
	return 1;
}

void fprep__client_outer_end(int outer)
{
	if (outer)
		client_outer.serial = 0;
}

nng_time fprep__client_deadline(const fprep_client *c)
{
	if (client_outer.serial == c->serial)
		return client_outer.deadline;
	return nng_clock() + (nng_time)c->timeout_ms;
}

/* client_send sends msg (taking it) on the slot's context before the
 * call's deadline. Returns 0 or an enum fprep_err, recorded. */
static int client_send(struct fprep__client_slot *s, nng_msg *msg,
                       nng_time deadline)
{
	int rv;

	nng_aio_set_timeout(s->aio, fprep__client_left(deadline));
	nng_aio_set_msg(s->aio, msg);
	nng_ctx_send(s->ctx, s->aio);
	nng_aio_wait(s->aio);
	if ((rv = nng_aio_result(s->aio)) != 0) {
		nng_msg_free(nng_aio_get_msg(s->aio));
		nng_aio_set_msg(s->aio, NULL);
		return client_step_error(s->c, rv, "sending the request");
	}
	return 0;
}

/* client_take_reply takes the reply that aio's finished receive holds
 * into *replyp, or records and returns its error. */
static int client_take_reply(fprep_client *c, nng_aio *aio, nng_msg **replyp)
{
	int rv;

	if ((rv = nng_aio_result(aio)) != 0)
		return client_step_error(c, rv, "waiting for the reply");
	*replyp = nng_aio_get_msg(aio);
	nng_aio_set_msg(aio, NULL);
	return FPREP_OK;
}

/* client_roundtrip sends msg (taking it) on the slot's context and waits
 * for the reply, all before the call's deadline. */
static int client_roundtrip(struct fprep__client_slot *s, nng_msg *msg,
                            nng_time deadline, nng_msg **replyp)
{
	int rv;

	*replyp = NULL;
	if ((rv = client_send(s, msg, deadline)) != 0)
		return rv;
	nng_aio_set_timeout(s->aio, fprep__client_left(deadline));
	nng_ctx_recv(s->ctx, s->aio);
	nng_aio_wait(s->aio);
	return client_take_reply(s->c, s->aio, replyp);
}

int fprep__client_add_shm(fprep_client *c, uint32_t id, void *base, size_t size,
                          uint64_t gen)
{
	struct fprep__client_shm *t;

	pthread_mutex_lock(&c->shm_mtx);
	t = realloc(c->shm, (c->nshm + 1) * sizeof(*t));
	if (t == NULL) {
		pthread_mutex_unlock(&c->shm_mtx);
		return FPREP_ENOMEM;
	}
	t[c->nshm++] = (struct fprep__client_shm){id, base, size, gen};
	c->shm = t;
	pthread_mutex_unlock(&c->shm_mtx);
	return 0;
}

void fprep__client_remove_shm(fprep_client *c, uint32_t id, void *base)
{
	pthread_mutex_lock(&c->shm_mtx);
	for (unsigned i = 0; i < c->nshm; i++)
		if (c->shm[i].id == id && c->shm[i].base == base) {
			c->shm[i] = c->shm[--c->nshm];
			break;
		}
	pthread_mutex_unlock(&c->shm_mtx);
}

/* fprep__client_reply_area finds where the daemon writes the reply of req,
 * which asks for it in its output region (shm_reply): a region this client
 * registered, the reply header inside it. Returns the header's address,
 * or NULL after recording why. */
uint8_t *fprep__client_reply_area(fprep_client *c, const fprep_request *req)
{
	uint64_t end, gen = atomic_load(&c->conn_gen);
	uint8_t *area = NULL;

	pthread_mutex_lock(&c->shm_mtx);
	for (unsigned i = 0; i < c->nshm; i++) {
		const struct fprep__client_shm *r = &c->shm[i];

		/* A region of an earlier connection is gone, and its id
		 * may be another region's now. */
		if (r->id != req->out_region || r->gen != gen)
			continue;
		end = req->out_offset + req->out_capacity;
		if (req->output_loc == FPREP_LOC_SHM &&
		    req->out_capacity >= FPREP_REPLY_HEADER_SIZE &&
		    end >= req->out_offset && end <= r->size && end % 8 == 0)
			area = r->base + end - FPREP_REPLY_HEADER_SIZE;
		break;
	}
	pthread_mutex_unlock(&c->shm_mtx);
	if (area == NULL)
		fprep__client_error(
		        c, FPREP_EINVAL,
		        "shm_reply: out_region %" PRIu32 " is not a "
		        "shared-memory region of this client, or "
		        "out_offset + out_capacity (a multiple of 8) "
		        "does not lie inside it",
		        req->out_region);
	return area;
}

static long client_futex(_Atomic uint64_t *word, int op, uint32_t val)
{
	/* The low 32 bits of the little-endian request_id. */
	return syscall(SYS_futex, (uint32_t *)(void *)word, op, val, NULL, NULL,
	               0);
}

/* client_reply_cb: the reply's receive ended (on an nng thread): nng's
 * reply came, or an error, or the caller cancelled it after taking the
 * header from shared memory. While the caller still waits, it is told to
 * take nng's reply (or nng's error) instead: a value no request id has in
 * the header's request_id, and a wake. The header, once there, is never
 * overwritten. */
static void client_reply_cb(void *arg)
{
	struct fprep__client_slot *s = arg;
	int state = CLIENT_WAIT_WAITING;
	uint64_t v;

	if (!atomic_compare_exchange_strong(&s->reply_state, &state,
	                                    CLIENT_WAIT_NNG))
		return;
	v = atomic_load(s->reply_word);
	while (v != s->reply_id &&
	       !atomic_compare_exchange_weak(s->reply_word, &v,
	                                     CLIENT_REPLY_VIA_NNG))
		;
	client_futex(s->reply_word, FUTEX_WAKE, INT_MAX);
}

/* client_raio_retire waits for the receive that the slot's last reply
 * through shared memory cancelled (its callback has long run, as a rule)
 * and drops nng's copy of that reply, so raio can take the next
 * receive. */
static void client_raio_retire(struct fprep__client_slot *s)
{
	if (!s->raio_busy)
		return;
	nng_aio_wait(s->raio);
	if (nng_aio_result(s->raio) == 0)
		nng_msg_free(nng_aio_get_msg(s->raio));
	nng_aio_set_msg(s->raio, NULL);
	s->raio_busy = 0;
}

/* client_wait_word waits until the request_id at word is no longer v: it
 * polls for up to the client's spin_us, then sleeps in futex(2) (woken by
 * the daemon's write or by the receive's callback) for at most 10 ms, so
 * that the caller sees a connection that closed meanwhile. */
static void client_wait_word(fprep_client *c, _Atomic uint64_t *word,
                             uint64_t v)
{
	const struct timespec bound = {0, 10000000};
	unsigned spin_us =
	        atomic_load_explicit(&c->spin_us, memory_order_relaxed);
	struct timespec t0, t;
	unsigned i;

	if (spin_us != 0) {
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (i = 1;; i++) {
			if (atomic_load_explicit(word, memory_order_relaxed) !=
			    v)
				return;
			if (i % 64 != 0)
				continue;
			clock_gettime(CLOCK_MONOTONIC, &t);
			if ((t.tv_sec - t0.tv_sec) * 1000000 +
			            (t.tv_nsec - t0.tv_nsec) / 1000 >=
			    (long)spin_us)
				break;
		}
	}
	syscall(SYS_futex, (uint32_t *)(void *)word, FUTEX_WAIT, (uint32_t)v,
	        &bound, NULL, 0);
}

/* client_roundtrip_shm is client_roundtrip for a request whose reply the
 * daemon also writes at area (protocol.h, "The reply in shared memory"):
 * it waits on the futex there, not on nng's receive, and whichever of the
 * two comes first is the reply. A reply read from memory is copied into a
 * message of its own, and nng's copy is dropped: the receive is cancelled
 * without waiting (its callback runs on an nng thread, a hand-off that
 * would add to every request's latency), and waited for after the next
 * request is sent, while the daemon works on that one. */
static int client_roundtrip_shm(struct fprep__client_slot *s, nng_msg *msg,
                                uint8_t *area, uint64_t id, nng_time deadline,
                                nng_msg **replyp)
{
	_Atomic uint64_t *word = (_Atomic uint64_t *)(void *)(area + 8);
	uint64_t lost = atomic_load(&s->c->conn_lost);
	nng_msg *copy;
	uint64_t v;
	int rv;

	*replyp = NULL;
	atomic_store_explicit(word, 0, memory_order_relaxed);
	if ((rv = client_send(s, msg, deadline)) != 0)
		return rv;
	client_raio_retire(s);
	s->reply_word = word;
	s->reply_id = id;
	atomic_store(&s->reply_state, CLIENT_WAIT_WAITING);
	nng_aio_set_timeout(s->raio, fprep__client_left(deadline));
	nng_ctx_recv(s->ctx, s->raio);
	/* The receive's own timeout ends the wait: its callback wakes us. */
	while ((v = atomic_load_explicit(word, memory_order_acquire)) != id &&
	       v != CLIENT_REPLY_VIA_NNG) {
		if (atomic_load(&s->c->conn_lost) != lost) {
			/* The daemon died: its reply will not come there. */
			nng_aio_cancel(s->raio);
			nng_aio_wait(s->raio);
			if (nng_aio_result(s->raio) == 0)
				nng_msg_free(nng_aio_get_msg(s->raio));
			nng_aio_set_msg(s->raio, NULL);
			atomic_store(&s->reply_state, CLIENT_WAIT_IDLE);
			return fprep__client_error(
			        s->c, FPREP_ETRANSPORT,
			        "the connection to the daemon "
			        "closed while a request waited for "
			        "its reply in shared memory");
		}
		client_wait_word(s->c, word, v);
	}
	if (v == id && nng_msg_alloc(&copy, FPREP_REPLY_HEADER_SIZE) == 0) {
		int state = CLIENT_WAIT_WAITING;

		memcpy(nng_msg_body(copy), area, FPREP_REPLY_HEADER_SIZE);
		if (atomic_compare_exchange_strong(&s->reply_state, &state,
		                                   CLIENT_WAIT_IDLE))
			nng_aio_cancel(s->raio);
		else /* the callback runs: let it end before area goes */
			nng_aio_wait(s->raio);
		s->raio_busy = 1;
		*replyp = copy;
		return FPREP_OK;
	}
	/* nng's reply (or error) came first, or no memory for the copy:
	 * nng's reply will do. */
	nng_aio_wait(s->raio);
	return client_take_reply(s->c, s->raio, replyp);
}

/* fprep__client_request_id gives req the protocol's version and the client's
 * next request id. */
void fprep__client_request_id(fprep_client *c, fprep_request *req)
{
	req->version = FPREP_PROTOCOL_VERSION;
	req->request_id = atomic_fetch_add(&c->next_id, 1);
}

/* fprep__client_message builds a request message: head, an encoded request
 * header, plus payload_size bytes of payload. */
int fprep__client_message(fprep_client *c, const uint8_t *head,
                          const void *payload, size_t payload_size,
                          nng_msg **msgp)
{
	nng_msg *msg;
	uint8_t *body;

	*msgp = NULL;
	if (nng_msg_alloc(&msg, FPREP_REQUEST_HEADER_SIZE + payload_size) != 0)
		return fprep__client_error(
		        c, FPREP_ENOMEM, "no memory for a %zu-byte request",
		        FPREP_REQUEST_HEADER_SIZE + payload_size);
	body = nng_msg_body(msg);
	memcpy(body, head, FPREP_REQUEST_HEADER_SIZE);
	if (payload_size > 0)
		memcpy(body + FPREP_REQUEST_HEADER_SIZE, payload, payload_size);
	*msgp = msg;
	return FPREP_OK;
}

/* client_message builds the request message: header plus payload_size
 * bytes of payload. Assigns the request id. */
static int client_message(fprep_client *c, fprep_request *req,
                          const void *payload, size_t payload_size,
                          nng_msg **msgp)
{
	uint8_t head[FPREP_REQUEST_HEADER_SIZE];

	fprep__client_request_id(c, req);
	fprep_request_encode(req, head);
	return fprep__client_message(c, head, payload, payload_size, msgp);
}

/* fprep__client_check_ids checks that h answers the request request_id of kind
 * kind: 0, or FPREP_EMISMATCH with why. */
int fprep__client_check_ids(fprep_client *c, uint64_t request_id, uint16_t kind,
                            const fprep_reply_header *h)
{
	if (h->request_id == request_id && h->kind == kind)
		return 0;
	return fprep__client_error(c, FPREP_EMISMATCH,
	                           "reply for request %llu kind %u, expected "
	                           "request %llu kind %u",
	                           (unsigned long long)h->request_id, h->kind,
	                           (unsigned long long)request_id, kind);
}

/* fprep__client_note_status makes the daemon's error in h, if any, the client's
 * last error text (the call itself succeeded). */
void fprep__client_note_status(fprep_client *c, const fprep_reply_header *h)
{
	if (h->status != FPREP_OK)
		fprep__client_error(c, FPREP_OK, "server: %s: %s",
		                    fprep_err_name((int)h->status), h->message);
}

/* client_check_reply decodes reply (taking it) as the answer to the
 * request request_id of kind kind and stores it in *res. */
static int client_check_reply(fprep_client *c, uint64_t request_id,
                              uint16_t kind, nng_msg *reply, fprep_result *res)
{
	uint8_t *body = nng_msg_body(reply);
	size_t len = nng_msg_len(reply);
	int err;

	if ((err = fprep_reply_decode(body, len, &res->header))) {
		err = fprep__client_error(c, err,
		                          "unreadable reply of %zu bytes (%s)",
		                          len, fprep_err_name(err));
		goto err_reply;
	}
	if ((err = fprep__client_check_ids(c, request_id, kind, &res->header)))
		goto err_reply;
	if (kind == FPREP_KIND_INFO) {
		/* A NUL after the text, not counted in payload_size. */
		if (nng_msg_append(reply, "", 1) != 0) {
			err = fprep__client_error(
			        c, FPREP_ENOMEM, "no memory for the info text");
			goto err_reply;
		}
		body = nng_msg_body(reply);
	}
	fprep__client_note_status(c, &res->header);
	res->payload = body + FPREP_REPLY_HEADER_SIZE;
	res->payload_size = (size_t)res->header.payload_size;
	res->priv = reply;
	return FPREP_OK;

err_reply:
	nng_msg_free(reply);
	memset(res, 0, sizeof(*res));
	return err;
}

int fprep__client_exchange(fprep_client *c, nng_msg *msg, uint8_t *area,
                           uint64_t id, uint16_t kind, nng_time deadline,
                           fprep_result *res)
{
	struct fprep__client_slot *s = NULL;
	nng_msg *reply = NULL;
	int err;

	if ((err = client_slot_get(c, deadline, &s))) {
		nng_msg_free(msg);
		return err;
	}
	err = area != NULL
	              ? client_roundtrip_shm(s, msg, area, id, deadline, &reply)
	              : client_roundtrip(s, msg, deadline, &reply);
	client_slot_put(s);
	if (err)
		return err;
	return client_check_reply(c, id, kind, reply, res);
}

/* nng_fits: every request may go through the socket. */
static int nng_fits(fprep_client *c, const fprep_request *req)
{
	(void)c;
	(void)req;
	return 1;
}

/* nng_post: the message is made by the wait, with the header. */
static int nng_post(fprep_client *c, fprep__call *call)
{
	(void)c;
	(void)call;
	return FPREP_OK;
}

/* nng_wait sends call->wire and its inline frame in one message on a call
 * slot, and waits for the reply: through the socket, or in the output
 * region when wire asks (shm_reply). */
static int nng_wait(fprep_client *c, fprep__call *call, fprep_result *res)
{
	uint8_t head[FPREP_REQUEST_HEADER_SIZE], *area = NULL;
	nng_msg *msg;
	int err;

	if (call->wire.shm_reply &&
	    (area = fprep__client_reply_area(c, &call->wire)) == NULL)
		return FPREP_EINVAL;
	fprep_request_encode(&call->wire, head);
	if ((err = fprep__client_message(c, head, call->payload,
	                                 call->payload_size, &msg)))
		return err;
	return fprep__client_exchange(c, msg, area, call->wire.request_id,
	                              call->wire.kind,
	                              fprep__client_deadline(c), res);
}

const fprep__carrier fprep__carrier_nng = {
        .name = "nng",
        .fits = nng_fits,
        .post = nng_post,
        .wait = nng_wait,
        .release = NULL,
};

void fprep__client_slots_fini(fprep_client *c)
{
	for (unsigned i = 0; i < c->nslots; i++) {
		struct fprep__client_slot *s = c->slots[i];

		nng_aio_stop(s->aio);
		client_raio_retire(s);
		nng_aio_stop(s->raio);
		nng_ctx_close(s->ctx);
	}
	nng_close(c->sock);
	for (unsigned i = 0; i < c->nslots; i++) {
		nng_aio_free(c->slots[i]->aio);
		nng_aio_free(c->slots[i]->raio);
		free(c->slots[i]);
	}
	c->nslots = 0;
}

/* The asynchronous API: each pending request has its own context and aio.
 * The aio callback (on an nng thread) turns the completed send into a
 * receive, and the completed receive into "done": it then wakes waiters
 * and calls the user's callback. fprep_pending_wait checks the reply on
 * the caller's thread. */
enum { PENDING_SEND, PENDING_RECV, PENDING_DONE };

struct fprep_pending {
	fprep_client *client;
	uint64_t id;   /* the request's id */
	uint16_t kind; /* and kind */
	nng_ctx ctx;
	nng_aio *aio;
	nng_time deadline;
	pthread_mutex_t mtx;
	pthread_cond_t cv;
	int state;
	int rv;         /* nng result of the failed step, or 0 */
	nng_msg *reply; /* on success */
	fprep_done_fn cb;
	void *arg;
};

static void pending_cb(void *arg)
{
	fprep_pending *p = arg;
	nng_time now;
	int rv = nng_aio_result(p->aio);

	if (p->state == PENDING_SEND && rv == 0) {
		now = nng_clock();
		nng_aio_set_timeout(
		        p->aio, now >= p->deadline
		                        ? 1
		                        : (nng_duration)(p->deadline - now));
		pthread_mutex_lock(&p->mtx);
		p->state = PENDING_RECV;
		pthread_mutex_unlock(&p->mtx);
		nng_ctx_recv(p->ctx, p->aio);
		return;
	}
	if (rv != 0) {
		if (p->state == PENDING_SEND)
			nng_msg_free(nng_aio_get_msg(p->aio));
	} else {
		p->reply = nng_aio_get_msg(p->aio);
	}
	nng_aio_set_msg(p->aio, NULL);
	pthread_mutex_lock(&p->mtx);
	p->rv = rv;
	p->state = PENDING_DONE;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mtx);
	if (p->cb != NULL)
		p->cb(p, p->arg);
}

int fprep__client_submit(fprep_client *client, fprep_request *req,
                         const void *payload, size_t size, fprep_done_fn cb,
                         void *arg, fprep_pending **pp)
{
	nng_msg *msg;
	int err;

	*pp = NULL;
	if (fprep__client_forked(client))
		return fprep__client_forked_error(client);
	if (req->shm_reply) /* the daemon sends no nng reply for it */
		return fprep__client_error(
		        client, FPREP_EINVAL,
		        "shm_reply: a reply in shared memory is waited for by "
		        "fprep_client_request only");
	if ((err = client_message(client, req, payload, size, &msg)))
		return err;
	return fprep__client_submit_msg(client, msg, req->request_id, req->kind,
	                                cb, arg, pp);
}

int fprep__client_submit_msg(fprep_client *client, nng_msg *msg, uint64_t id,
                             uint16_t kind, fprep_done_fn cb, void *arg,
                             fprep_pending **pp)
{
	fprep_pending *p;
	int rv, err;

	*pp = NULL;
	p = calloc(1, sizeof(*p));
	if (p == NULL) {
		nng_msg_free(msg);
		return fprep__client_error(client, FPREP_ENOMEM, "no memory");
	}
	if ((rv = nng_ctx_open(&p->ctx, client->sock)) != 0) {
		err = fprep__client_error(client, fprep__client_nng_err(rv),
		                          "opening a context: %s",
		                          nng_strerror(rv));
		goto err_free;
	}
	if ((rv = nng_aio_alloc(&p->aio, pending_cb, p)) != 0) {
		err = fprep__client_error(client, fprep__client_nng_err(rv),
		                          "allocating an aio: %s",
		                          nng_strerror(rv));
		goto err_ctx;
	}
	pthread_mutex_init(&p->mtx, NULL);
	pthread_cond_init(&p->cv, NULL);
	p->client = client;
	p->id = id;
	p->kind = kind;
	p->cb = cb;
	p->arg = arg;
	p->state = PENDING_SEND;
	p->deadline = nng_clock() + (nng_time)client->timeout_ms;
	nng_aio_set_timeout(p->aio, client->timeout_ms);
	atomic_fetch_add(&client->refs, 1);
	nng_aio_set_msg(p->aio, msg);
	nng_ctx_send(p->ctx, p->aio);
	*pp = p;
	return FPREP_OK;

err_ctx:
	nng_ctx_close(p->ctx);
err_free:
	free(p);
	nng_msg_free(msg);
	return err;
}

int fprep_pending_done(const fprep_pending *p)
{
	fprep_pending *q = (fprep_pending *)p;
	int done;

	pthread_mutex_lock(&q->mtx);
	done = q->state == PENDING_DONE;
	pthread_mutex_unlock(&q->mtx);
	return done;
}

int fprep_pending_wait(fprep_pending *p, fprep_result *res)
{
	fprep_client *c = p->client;
	int err;

	memset(res, 0, sizeof(*res));
	/* The parent's request: no thread of the child completes it. */
	if (fprep__client_forked(c))
		return fprep__client_forked_error(c);
	pthread_mutex_lock(&p->mtx);
	while (p->state != PENDING_DONE)
		pthread_cond_wait(&p->cv, &p->mtx);
	pthread_mutex_unlock(&p->mtx);
	if (p->rv != 0)
		err = fprep__client_error(c, fprep__client_nng_err(p->rv),
		                          "request %llu: %s (nng error %d)",
		                          (unsigned long long)p->id,
		                          nng_strerror(p->rv), p->rv);
	else
		err = client_check_reply(c, p->id, p->kind, p->reply, res);
	nng_aio_free(p->aio);
	nng_ctx_close(p->ctx);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mtx);
	free(p);
	fprep__client_unref(c);
	return err;
}

int fprep_client_register(fprep_client *c, fprep_register_request *req,
                          fprep_result *res)
{
	nng_time deadline = fprep__client_deadline(c);
	nng_msg *msg = NULL;

	memset(res, 0, sizeof(*res));
	fprep__client_error_clear(c);
	if (fprep__client_forked(c))
		return fprep__client_forked_error(c);
	req->version = FPREP_PROTOCOL_VERSION;
	req->request_id = atomic_fetch_add(&c->next_id, 1);
	if (nng_msg_alloc(&msg, FPREP_REQUEST_HEADER_SIZE) != 0)
		return fprep__client_error(c, FPREP_ENOMEM,
		                           "no memory for a %d-byte request",
		                           FPREP_REQUEST_HEADER_SIZE);
	fprep_register_request_encode(req, nng_msg_body(msg));
	return fprep__client_exchange(c, msg, NULL, req->request_id, req->kind,
	                              deadline, res);
}

int fprep_client_info(fprep_client *client, fprep_result *res)
{
	fprep_request req;

	fprep__call call;

	memset(res, 0, sizeof(*res));
	if (fprep__client_forked(client))
		return fprep__client_forked_error(client);
	fprep__client_error_clear(client);
	memset(&req, 0, sizeof(req));
	req.kind = FPREP_KIND_INFO;
	fprep__client_request_id(client, &req);
	memset(&call, 0, sizeof(call));
	call.req = &req;
	call.wire = req;
	return nng_wait(client, &call, res);
}
