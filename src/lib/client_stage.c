/*
 * client_stage.c: inline frames staged through shared memory.
 *
 * The design is simple: the simple call (fprep_client_request with the
 * frame in the caller's memory and the tensor wanted in the reply) is
 * turned, on an ipc:// client of one daemon, into the shared-memory call:
 * the frame is copied into a region of the client's own (a stage), the
 * daemon reads it there and writes the tensor and the reply header back
 * into the same stage (shm_reply), and the result views the tensor where
 * the daemon wrote it. A call whose tensor goes to the caller's CUDA
 * memory (output_loc CUDA, a registered CUDA region) is staged the same
 * way for its frame only: the daemon writes the tensor into that region,
 * the reply header comes back through the doorbell or nng, and the stage
 * is free again when the call returns. One copy of the frame on this side and
 * none of the tensor, against a copy into the message, two through the socket
 * and one out of it on the inline path; and the reply is seen through the futex
 * in the stage, not through nng's threads.
 *
 * A stage is a region (fprep_region_open) of [tensor area + reply
 * header][frame], each part page-aligned. A result that views a stage
 * holds it until fprep_result_fini, from any thread; a held stage is not
 * used again, so the client keeps a few (FPREP__STAGES_MAX) and sends
 * inline when all are held. refs counts the client's hold (1 while it is
 * in the pool) and the call's, then the result's (1 while held): a call
 * takes a free stage under the pool's mutex, so calls on several threads
 * each have their own; whichever drops the last hold frees it, so a result
 * may outlive its client. A stage whose request
 * failed (a timeout: the daemon may still write into it) is never reused.
 * A daemon that refuses a stage (shared memory over its limits, or none
 * at all) gets that size inline from then on; one that cannot map the
 * client's memory at all (another /dev/shm: containers) is named in one
 * line on stderr, once per client.
 *
 * These are two carriers (carrier.h): "stage" (the tensor back in the
 * stage, viewed by the result, which holds the stage through the
 * carrier's release) and "cuda" (the tensor into the caller's CUDA
 * region; the stage is free again when the call returns). Their post
 * takes a stage and copies the frame, or declines (all held, or refused)
 * and the route sends the frame through nng; their wait sends the staged
 * request through the client's doorbell when its entry is free, else
 * through nng (fprep__carrier_region_wait, client_doorbell.c). The
 * doorbell is set up between the two by the route (client.c), once per
 * connection, after the stage was taken, so the daemon's limits on
 * regions favour the stage. A daemon restart makes the stages of the
 * earlier connection stale: they are dropped without an UNREGISTER (their
 * ids may be new regions' now), and a staged request the new daemon
 * refused for it declines, to go inline.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "carrier.h"
#include "client_conn.h"
#include "client_internal.h"
#include "fprep_assert.h"
#include "frameprep/frameprep.h"

#define STAGE_PAGE 4096u

struct fprep__stage {
	const fprep__carrier *carrier; /* first: a result's hold (carrier.h) */
	fprep_region *region;
	atomic_uint refs;    /* 1: in the pool, free; 2: held by a result */
	size_t out_capacity; /* tensor area + reply header, a multiple of 8 */
	size_t frame_offset; /* page-aligned, after the tensor area */
	uint64_t gen;        /* the client's connection it was registered on */
};

/* stage_round rounds n up to a multiple of align (a power of two), or
 * returns 0 on overflow. */
static size_t stage_round(size_t n, size_t align)
{
	return n > SIZE_MAX - (align - 1) ? 0 : (n + align - 1) & ~(align - 1);
}

/* stage_free frees s once nothing holds it. With the client still open
 * (client_open) the daemon is told to drop the region; after it closed,
 * the connection's end already did, and the mapping alone is left. */
static void stage_free(struct fprep__stage *s, int client_open)
{
	if (client_open)
		fprep_region_close(s->region);
	else
		fprep__region_unmap(s->region);
	free(s);
}

/* stage_drop takes s out of the pool and drops the pool's hold. */
static void stage_drop(struct fprep__stages *pool, unsigned i)
{
	struct fprep__stage *s = pool->s[i];

	FPREP__ASSERT(pthread_mutex_trylock(&pool->mtx) == EBUSY);
	pool->s[i] = pool->s[--pool->n];
	if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1)
		stage_free(s, 1);
}

/* stage_drop_stale takes out of the pool the stages registered on an
 * earlier connection of the client (the daemon restarted: they are gone
 * on its side, and their ids may be given to new regions, so no
 * UNREGISTER is sent for them). A held one goes with its result. */
static void stage_drop_stale(fprep_client *c, struct fprep__stages *pool,
                             uint64_t gen)
{
	for (unsigned i = pool->n; i-- > 0;) {
		struct fprep__stage *s = pool->s[i];

		if (s->gen == gen)
			continue;
		pool->s[i] = pool->s[--pool->n];
		fprep__client_remove_shm(c, fprep_region_id(s->region),
		                         fprep_region_base(s->region));
		if (atomic_fetch_sub_explicit(&s->refs, 1,
		                              memory_order_acq_rel) == 1)
			stage_free(s, 0);
	}
}

/* stage_open opens a stage for a frame of frame_bytes and a tensor of
 * tensor_bytes into *sp; returns 0 or the error (FPREP_EREGION or
 * FPREP_EPERM: the daemon could not open or map the shared memory, its
 * reason the client's last error). */
static int stage_open(fprep_client *c, size_t frame_bytes, size_t tensor_bytes,
                      struct fprep__stage **sp)
{
	struct fprep__stage *s;
	size_t cap, t, f;
	int err;

	*sp = NULL;
	cap = stage_round(tensor_bytes, 8);
	if (cap == 0 || cap > SIZE_MAX - FPREP_REPLY_HEADER_SIZE)
		return FPREP_ELIMIT;
	cap += FPREP_REPLY_HEADER_SIZE;
	t = stage_round(cap, STAGE_PAGE);
	f = stage_round(frame_bytes, STAGE_PAGE);
	if (t == 0 || f == 0 || t > SIZE_MAX - f)
		return FPREP_ELIMIT;
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return FPREP_ENOMEM;
	s->gen = fprep__client_conn_gen(c);
	if ((err = fprep__region_open(&s->region, c, t + f)) != 0) {
		free(s);
		return err;
	}
	atomic_init(&s->refs, 1);
	s->carrier = &fprep__carrier_stage;
	s->out_capacity = cap;
	s->frame_offset = t;
	*sp = s;
	return 0;
}

/* stage_told_refused writes the one line a client ever writes: the
 * daemon could not map its shared memory, so frames go through the
 * socket. That is not an error (every call still succeeds) but it is a
 * deployment's mistake worth seeing: in containers, the daemon's and the
 * client's /dev/shm differ (deploy/container/README.md). */
static void stage_told_refused(fprep_client *c, struct fprep__stages *pool)
{
	if (pool->told_refused)
		return;
	pool->told_refused = 1;
	fprintf(stderr,
	        "frameprep: the daemon cannot map this process's shared memory "
	        "(%s): frames go through the socket instead (slower); the "
	        "daemon and its clients need the same /dev/shm\n",
	        fprep_client_last_error(c));
}

/* stage_take finds a free stage of the pool that fits (closing a free one
 * too small to make room), or opens one, and holds it for the call (refs
 * 2); NULL when all are held or the daemon refuses. */
static struct fprep__stage *stage_take(fprep_client *c,
                                       struct fprep__stages *pool,
                                       size_t frame_bytes, size_t tensor_bytes)
{
	struct fprep__stage *s = NULL;
	size_t need = frame_bytes + tensor_bytes;
	unsigned i;
	int err;

	pthread_mutex_lock(&pool->mtx);
	stage_drop_stale(c, pool, fprep__client_conn_gen(c));
	for (i = 0; i < pool->n; i++) {
		s = pool->s[i];
		if (atomic_load_explicit(&s->refs, memory_order_acquire) == 1 &&
		    fprep_region_size(s->region) - s->frame_offset >=
		            frame_bytes &&
		    s->out_capacity - FPREP_REPLY_HEADER_SIZE >= tensor_bytes)
			goto found;
	}
	s = NULL;
	if (pool->refused_bytes != 0 && need >= pool->refused_bytes)
		goto out;
	if (pool->n == FPREP__STAGES_MAX) {
		/* Make room: a free stage too small goes. */
		for (i = 0; i < pool->n; i++)
			if (atomic_load_explicit(&pool->s[i]->refs,
			                         memory_order_acquire) == 1)
				break;
		if (i == pool->n)
			goto out;
		stage_drop(pool, i);
	}
	if ((err = stage_open(c, frame_bytes, tensor_bytes, &s)) != 0) {
		if (err == FPREP_EREGION || err == FPREP_EPERM)
			stage_told_refused(c, pool);
		pool->refused_bytes = need;
		goto out;
	}
	pool->s[pool->n++] = s;
found:
	atomic_store_explicit(&s->refs, 2, memory_order_relaxed);
out:
	pthread_mutex_unlock(&pool->mtx);
	return s;
}

/* stage_retire takes s, which the caller's call holds, out of use for
 * good, and drops the call's hold (and the pool's, when it is still in
 * the pool). A stale stage (of an earlier connection) is forgotten
 * without an UNREGISTER, whose id may be another region's now. */
static void stage_retire(fprep_client *c, struct fprep__stages *pool,
                         struct fprep__stage *s, int stale)
{
	unsigned i, holds = 1;

	pthread_mutex_lock(&pool->mtx);
	for (i = 0; i < pool->n && pool->s[i] != s; i++)
		;
	if (i < pool->n) {
		pool->s[i] = pool->s[--pool->n];
		holds = 2;
	}
	pthread_mutex_unlock(&pool->mtx);
	if (stale)
		fprep__client_remove_shm(c, fprep_region_id(s->region),
		                         fprep_region_base(s->region));
	if (atomic_fetch_sub_explicit(&s->refs, holds, memory_order_acq_rel) ==
	    holds)
		stage_free(s, !stale);
}

/* stage_release drops a hold on s (a call's, or its result's through
 * fprep_result_fini), freeing it after the last. Any thread. */
static void stage_release(void *hold)
{
	struct fprep__stage *s = hold;

	if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1)
		stage_free(s, 0);
}

/* stage_fits_frame tells whether req, an inline FRAME or ECHO on c, may
 * be staged with its tensor going to output_loc: a client of one ipc://
 * daemon with staging on, a frame, a tensor the request's shape gives. */
static int stage_fits_frame(fprep_client *c, const fprep_request *req,
                            int output_loc)
{
	uint32_t shape[4];
	uint64_t tensor;

	return (req->kind == FPREP_KIND_FRAME ||
	        req->kind == FPREP_KIND_ECHO) &&
	       req->input_loc == FPREP_LOC_INLINE &&
	       req->output_loc == output_loc && !req->shm_reply &&
	       req->input_size > 0 && req->input_size <= SIZE_MAX &&
	       !atomic_load(&c->stage_off) && c->daemons == 1 &&
	       atomic_load(&c->peer_uid) != 0 &&
	       fprep_tensor_shape(req, shape, &tensor) == 0 &&
	       tensor <= SIZE_MAX;
}

/* stage_fits: the tensor comes back in the stage, for the result to
 * view. */
static int stage_fits(fprep_client *c, const fprep_request *req)
{
	return stage_fits_frame(c, req, FPREP_LOC_INLINE);
}

/* cuda_fits: the tensor goes where the caller's CUDA region says. */
static int cuda_fits(fprep_client *c, const fprep_request *req)
{
	return stage_fits_frame(c, req, FPREP_LOC_CUDA);
}

/* stage_post takes a stage for the call and copies the frame into it;
 * declines when none can be had (all held, or refused). A stage has room
 * for the tensor even when it goes to CUDA memory, so that one pool
 * serves both carriers. */
static int stage_post(fprep_client *c, fprep__call *call)
{
	const fprep_request *req = call->req;
	struct fprep__stage *s;
	uint32_t shape[4];
	uint64_t tensor;

	if (fprep_tensor_shape(req, shape, &tensor) != 0)
		return FPREP__CARRIER_DECLINED;
	s = stage_take(c, &c->stages, (size_t)req->input_size, (size_t)tensor);
	if (s == NULL) {
		fprep__client_set_error(c, FPREP_OK, "");
		return FPREP__CARRIER_DECLINED;
	}
	memcpy((uint8_t *)fprep_region_base(s->region) + s->frame_offset,
	       call->payload, (size_t)req->input_size);
	if (req->output_loc == FPREP_LOC_INLINE) {
		fprep_request_set_regions(&call->wire, s->region,
		                          s->frame_offset, s->region, 0,
		                          s->out_capacity);
		call->wire.shm_reply = 1;
	} else {
		/* The tensor goes where the caller's CUDA region says; the
		 * reply header comes through the doorbell's entry or nng. */
		call->wire.input_loc = FPREP_LOC_SHM;
		call->wire.in_region = fprep_region_id(s->region);
		call->wire.in_offset = s->frame_offset;
	}
	call->payload = NULL;
	call->payload_size = 0;
	call->staged = 1;
	call->s = s;
	return FPREP_OK;
}

/* stage_wait sends the staged request through the client's doorbell or
 * nng (fprep__carrier_region_wait) and makes the result view the tensor
 * where the daemon wrote it, holding the stage. A stage of a connection
 * gone (the daemon restarted after it was taken) that the daemon refused
 * or that was not sent is retired, and the call declines: inline. */
static int stage_wait(fprep_client *c, fprep__call *call, fprep_result *res)
{
	struct fprep__stage *s = call->s;
	char why[FPREP__CLIENT_ERROR_MAX];
	int err, stale;

	/* Only after this carrier's post, which holds the stage. */
	FPREP__ASSERT(call->staged && s != NULL && atomic_load(&s->refs) >= 1);
	err = fprep__carrier_region_wait(c, call, res);
	stale = s->gen != fprep__client_conn_gen(c);
	if (stale && (err == FPREP_EINVAL ||
	              (err == 0 && res->header.status == FPREP_EREGION))) {
		if (err == 0)
			fprep_result_fini(res);
		stage_retire(c, &c->stages, s, 1);
		fprep__client_set_error(c, FPREP_OK, "");
		return FPREP__CARRIER_DECLINED;
	}
	if (err != 0) {
		/* The daemon may still write into it: never reused. Its
		 * UNREGISTER would clear the reason. */
		snprintf(why, sizeof(why), "%s", fprep_client_last_error(c));
		stage_retire(c, &c->stages, s, stale);
		return fprep__client_set_error(c, err, why);
	}
	if (res->header.status == FPREP_OK &&
	    call->req->output_loc == FPREP_LOC_INLINE &&
	    res->header.output_loc == FPREP_LOC_SHM) {
		/* The tensor stays where the daemon wrote it: the result
		 * views it and holds the stage. */
		fprep_reply_header h = res->header;

		fprep_result_fini(res);
		res->header = h;
		res->header.output_loc = FPREP_LOC_INLINE;
		res->header.payload_size = res->header.tensor_size;
		res->payload = fprep_region_base(s->region);
		res->payload_size = (size_t)res->header.tensor_size;
		/* The call's hold becomes the result's. */
		res->priv = (void *)((uintptr_t)s | FPREP__RESULT_HELD);
		return 0;
	}
	stage_release(s); /* free again */
	return 0;
}

const fprep__carrier fprep__carrier_stage = {
        .name = "stage",
        .fits = stage_fits,
        .post = stage_post,
        .wait = stage_wait,
        .release = stage_release,
};

const fprep__carrier fprep__carrier_cuda = {
        .name = "cuda",
        .fits = cuda_fits,
        .post = stage_post,
        .wait = stage_wait,
        .release = stage_release,
};

unsigned fprep__stages_shed(struct fprep__stages *pool)
{
	unsigned shed = 0;

	pthread_mutex_lock(&pool->mtx);
	for (unsigned i = pool->n; i-- > 0;)
		if (atomic_load_explicit(&pool->s[i]->refs,
		                         memory_order_acquire) == 1) {
			stage_drop(pool, i);
			shed++;
		}
	pthread_mutex_unlock(&pool->mtx);
	return shed;
}

void fprep__stages_fini(struct fprep__stages *pool)
{
	pthread_mutex_lock(&pool->mtx);
	while (pool->n > 0)
		stage_drop(pool, pool->n - 1);
	pool->refused_bytes = 0;
	pthread_mutex_unlock(&pool->mtx);
}

void fprep__stages_init(struct fprep__stages *pool)
{
	pthread_mutex_init(&pool->mtx, NULL);
	pool->n = 0;
	pool->refused_bytes = 0;
	pool->told_refused = 0;
}

void fprep__stages_destroy(struct fprep__stages *pool)
{
	pthread_mutex_destroy(&pool->mtx);
}
