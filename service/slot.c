/*
 * slot.c: the request state machine of frameprepd's loop. A slot cycles
 * through
 *
 *   RECV    a receive is posted on its context
 *   WORK    the request was decoded and validated (before anything was
 *           allocated) and its job submitted to the backend; the reply
 *           message, header space plus the tensor, is already allocated
 *           and the backend writes the tensor straight into it
 *   REGION  a REGISTER or UNREGISTER is with the regions module
 *           (regions.c), which calls back once it is done
 *   SEND    the reply (tensor, INFO text or error) is being sent, with a
 *           timeout (answer.c)
 *
 * and back to RECV, or to IDLE once shutdown began. A slot has at most one
 * event queued at a time, because it has at most one operation
 * outstanding. A slot of the doorbell pool (doorbell.c) has no context:
 * it starts at the request taken from a doorbell (fprep__slot_take),
 * answers into the doorbell's entry, and goes back to the pool (IDLE) at
 * its end.
 */
#include <inttypes.h>
#include <nng/nng.h>
#include <nng/transport/ipc/ipc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "metrics.h"
#include "reply.h"
#include "server_internal.h"
#include "trace.h"

#define SLOT_INFO_SIZE 4096

static uint32_t slot_us(uint64_t from_ns, uint64_t to_ns)
{
	uint64_t us = to_ns > from_ns ? (to_ns - from_ns) / 1000 : 0;

	return us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

void fprep__slot_aio_cb(void *arg)
{
	fprep__slot *s = arg;

	if (s->srv->cfg->trace)
		s->t_rx_ns = fprep__now_ns();
	s->ev.kind = FPREP__EV_AIO;
	s->aio_result = nng_aio_result(s->aio);
	fprep__evq_push(&s->srv->evq, &s->ev);
}

/* slot_reply_direct sends the reply of a job that succeeded from the
 * backend's thread that finished it, which saves the reply a hand-off to
 * the loop and back (tens of microseconds at every request). It touches
 * only what the slot owns while its job is out (the reply message, the
 * job, its aio and context) and atomics; what the loop owns (the region
 * uses, the connection's counts, the served count) is settled by the loop
 * when the send's event arrives, in state WORK (slot_sent_direct). Errors,
 * fatal jobs, regions the SIGBUS guard caught and a stopping server take
 * the loop's way (slot_completed). Returns 1 when it sent the reply. */
static int slot_reply_direct(fprep__slot *s)
{
	fprep__server *srv = s->srv;
	fprep__job *job = &s->job;
	nng_msg *rep = s->rep_msg;
	uint64_t now;

	if (job->status != FPREP_OK || job->fatal ||
	    atomic_load(&srv->no_direct) ||
	    (s->doorbell && fprep__memreg_broken(s->db_region)) ||
	    (job->in_region != NULL && fprep__memreg_broken(job->in_region)) ||
	    (job->out_region != NULL && fprep__memreg_broken(job->out_region)))
		return 0;
	now = fprep__now_ns();
	job->message[0] = '\0';
	if (job->trace) {
		fprep__trace_times tt = {.rx = s->t_rx_ns,
		                         .loop = s->t_recv_ns,
		                         .seen = now,
		                         .sent = now};
		fprep__trace_text(job->message, sizeof(job->message), &tt, job);
	}
	fprep__reply_tensor_finish(rep, job,
	                           slot_us(s->t_recv_ns, job->t_start_ns),
	                           slot_us(s->t_recv_ns, now));
	s->direct = 1;
	if (s->counted) { /* its work is done, as in fprep__slot_send */
		atomic_fetch_sub(&s->conn->inflight, 1);
		s->counted = 0;
	}
	fprep__metrics_reply(nng_msg_body(rep), nng_msg_len(rep), job->lane);
	fprep__metrics_request_end();
	s->ended = 1;
	if (s->doorbell) {
		/* Into the entry, as below; the region was sound just now,
		 * and if the guard caught it since, nobody can read it. */
		atomic_fetch_add(&s->conn->region_answered, 1);
		(void)fprep__reply_write(s->db_region, s->db_reply,
		                         nng_msg_body(rep));
		s->region_answered = 1;
		fprep__slot_sent_now(s, rep);
		return 1;
	}
	if (job->req.shm_reply) {
		/* Counted before the client can see its reply, so that its
		 * next requests, which may reach the loop before this slot's
		 * event, do not find the connection over its bound
		 * (fprep__slot_admit). */
		atomic_fetch_add(&s->conn->region_answered, 1);
		if (fprep__reply_to_region(job, nng_msg_body(rep))) {
			/* No nng send; the loop settles the slot as after
			 * one (slot_sent_direct). */
			s->region_answered = 1;
			fprep__slot_sent_now(s, rep);
			return 1;
		}
		atomic_fetch_sub(&s->conn->region_answered, 1);
	}
	nng_aio_set_msg(s->aio, rep);
	nng_aio_set_timeout(s->aio, srv->cfg->send_timeout_ms);
	nng_ctx_send(s->ctx, s->aio);
	return 1;
}

/* slot_job_done: the backend's completion callback, on its thread. */
static void slot_job_done(fprep__job *job)
{
	fprep__slot *s = job->data;

	/* After a sticky device error no later completion is trusted: the
	 * loop answers them all (slot_completed). The backend's threads see
	 * this before the loop does. */
	if (job->fatal)
		atomic_store(&s->srv->no_direct, 1);
	else if (slot_reply_direct(s))
		return;
	s->ev.kind = FPREP__EV_DONE;
	fprep__evq_push(&s->srv->evq, &s->ev);
}

/* slot_begin puts s in state RECV for its next request, counting it
 * active when it rested. */
static void slot_begin(fprep__slot *s)
{
	if (s->state == FPREP__SLOT_IDLE)
		s->srv->active++;
	s->state = FPREP__SLOT_RECV;
	s->kind = 0;
	s->request_id = 0;
	s->direct = 0;
}

void fprep__slot_recv(fprep__slot *s)
{
	slot_begin(s);
	nng_aio_set_timeout(s->aio, NNG_DURATION_INFINITE);
	nng_ctx_recv(s->ctx, s->aio);
}

/* slot_region finds the region a FRAME names for its input or output (field
 * "in" or "out") at location loc: one of this connection's, of the kind loc
 * names, with [offset, offset + len) inside it. Returns it, or NULL after
 * answering the request with the error. */
static fprep__memreg *slot_region(fprep__slot *s, nng_msg *msg, int loc,
                                  uint32_t id, uint32_t pipe, uint64_t offset,
                                  uint64_t len, const char *field)
{
	char why[FPREP_MESSAGE_SIZE], span[32];
	fprep__memreg *r;
	int rv;

	r = fprep__regions_find(&s->srv->regions, id, pipe);
	if (r == NULL) {
		snprintf(why, sizeof(why),
		         "%s_region %" PRIu32 " is not a region of this "
		         "connection",
		         field, id);
		fprep__slot_fail(s, msg, FPREP_EREGION, why);
		return NULL;
	}
	if (fprep__memreg_on_device(r) != (loc == FPREP_LOC_CUDA)) {
		snprintf(why, sizeof(why),
		         "%s_region %" PRIu32 " is a %s region, not %s", field,
		         id,
		         fprep__memreg_on_device(r) ? "CUDA" : "shared-memory",
		         loc == FPREP_LOC_CUDA ? "CUDA" : "SHM");
		fprep__slot_fail(s, msg, FPREP_EREGION, why);
		return NULL;
	}
	snprintf(span, sizeof(span), "%s_offset + length", field);
	rv = fprep__memreg_span(r, offset, len, span, why, sizeof(why));
	if (rv != 0) {
		fprep__slot_fail(s, msg, rv, why);
		return NULL;
	}
	return r;
}

/* fprep__slot_unuse_regions ends the job's use of its registered regions. */
void fprep__slot_unuse_regions(fprep__slot *s)
{
	if (s->job.in_region != NULL)
		fprep__regions_unuse(&s->srv->regions, s->job.in_region);
	if (s->job.out_region != NULL)
		fprep__regions_unuse(&s->srv->regions, s->job.out_region);
	s->job.in_region = NULL;
	s->job.out_region = NULL;
}

/* slot_region_done answers a REGISTER or UNREGISTER once the regions
 * module is done with it; on the loop thread. */
static void slot_region_done(void *data, int status, uint32_t id,
                             const char *message)
{
	fprep__slot *s = data;
	fprep__server *srv = s->srv;
	nng_msg *msg = s->req_msg, *rep;
	uint32_t pipe = (uint32_t)nng_pipe_id(nng_msg_get_pipe(msg));
	uint64_t uid;
	char why[FPREP_MESSAGE_SIZE];

	s->req_msg = NULL;
	s->state = FPREP__SLOT_WORK;
	if (status != FPREP_OK) {
		fprep__slot_fail(s, msg, status, message);
		return;
	}
	if (s->kind == FPREP_KIND_UNREGISTER) {
		rep = fprep__reply_error(msg, s->kind, s->request_id, FPREP_OK,
		                         message);
		fprep__slot_answer(s, rep, "UNREGISTER");
		return;
	}
	if (nng_pipe_get_uint64(nng_msg_get_pipe(msg), NNG_OPT_IPC_PEER_UID,
	                        &uid) != 0) {
		/* The connection closed before the registration began (its
		 * close event came first): nobody can use the region. */
		fprep__regions_unregister(&srv->regions, id, pipe, NULL, NULL,
		                          why, sizeof(why));
		fprep__slot_fail(s, msg, FPREP_ECLOSED,
		                 "connection closed during registration");
		return;
	}
	rep = fprep__reply_region(msg, s->kind, s->request_id, id, message);
	fprep__slot_answer(s, rep,
	                   s->kind == FPREP_KIND_REGISTER ? "REGISTER"
	                                                  : "REGISTER_CUDA");
}

/* slot_park leaves s waiting for the regions module (rv 0), or answers
 * its request with the error rv it refused it with. */
static void slot_park(fprep__slot *s, nng_msg *msg, int rv, const char *why)
{
	if (rv != 0) {
		fprep__slot_fail(s, msg, rv, why);
		return;
	}
	s->req_msg = msg;
	s->state = FPREP__SLOT_REGION;
}

/* slot_register hands a REGISTER to the regions module, which answers
 * through slot_region_done. */
static void slot_register(fprep__slot *s, nng_msg *msg,
                          const fprep_register_request *req)
{
	fprep__server *srv = s->srv;
	nng_pipe pipe = nng_msg_get_pipe(msg);
	char why[FPREP_MESSAGE_SIZE];
	uint64_t uid;
	int rv;

	if (nng_pipe_get_uint64(pipe, NNG_OPT_IPC_PEER_UID, &uid) != 0) {
		fprep__slot_fail(
		        s, msg, FPREP_EUNSUPPORTED,
		        "REGISTER: shared memory needs an ipc:// connection "
		        "(the peer's uid is unknown on this one)");
		return;
	}
	rv = fprep__regions_register(&srv->regions, req->region_name,
	                             req->region_size,
	                             (uint32_t)nng_pipe_id(pipe), uid,
	                             slot_region_done, s, why, sizeof(why));
	slot_park(s, msg, rv, why);
}

/* slot_register_cuda hands a REGISTER_CUDA to the regions module, which
 * answers through slot_region_done. Like shared memory, only over ipc://:
 * a handle means nothing on another host. */
static void slot_register_cuda(fprep__slot *s, nng_msg *msg,
                               const fprep_register_request *req)
{
	fprep__server *srv = s->srv;
	nng_pipe pipe = nng_msg_get_pipe(msg);
	char why[FPREP_MESSAGE_SIZE];
	uint64_t uid;
	int rv;

	if (nng_pipe_get_uint64(pipe, NNG_OPT_IPC_PEER_UID, &uid) != 0) {
		fprep__slot_fail(s, msg, FPREP_EUNSUPPORTED,
		                 "REGISTER_CUDA: CUDA regions need an ipc:// "
		                 "connection (a handle means nothing on "
		                 "another host)");
		return;
	}
	rv = fprep__regions_register_cuda(
	        &srv->regions, req, (uint32_t)nng_pipe_id(pipe),
	        slot_region_done, s, why, sizeof(why));
	slot_park(s, msg, rv, why);
}

/* slot_unregister hands an UNREGISTER to the regions module: the reply
 * goes once the daemon no longer touches the region. */
static void slot_unregister(fprep__slot *s, nng_msg *msg,
                            const fprep_register_request *req)
{
	fprep__server *srv = s->srv;
	uint32_t pipe = (uint32_t)nng_pipe_id(nng_msg_get_pipe(msg));
	char why[FPREP_MESSAGE_SIZE];
	int rv;

	fprep__doorbell_drop_region(srv, req->region_id, pipe);
	rv = fprep__regions_unregister(&srv->regions, req->region_id, pipe,
	                               slot_region_done, s, why, sizeof(why));
	slot_park(s, msg, rv, why);
}

/* slot_submit starts a FRAME or ECHO request: allocates the reply with
 * room for the tensor and hands the job to the backend. */
static void slot_submit(fprep__slot *s, nng_msg *msg, const fprep_request *req)
{
	fprep__server *srv = s->srv;
	fprep__job *job = &s->job;
	char why[FPREP_MESSAGE_SIZE];
	uint64_t bytes;
	uint8_t *tensor = NULL;
	nng_msg *rep = NULL;
	int rv;

	fprep__memreg *in = NULL, *out = NULL;
	uint32_t pipe = (uint32_t)nng_pipe_id(nng_msg_get_pipe(msg));

	/* Shape, size and transform are decided here, once. */
	memset(job, 0, sizeof(*job));
	job->req = *req;
	rv = fprep__job_plan(job);
	if (rv != 0) {
		fprep__slot_fail(s, msg, rv, "tensor shape: invalid request");
		return;
	}
	bytes = job->output_size;
	if (req->input_loc != FPREP_LOC_INLINE &&
	    (in = slot_region(s, msg, req->input_loc, req->in_region, pipe,
	                      req->in_offset, req->input_size, "in")) == NULL)
		return;
	if (req->output_loc != FPREP_LOC_INLINE &&
	    (out = slot_region(s, msg, req->output_loc, req->out_region, pipe,
	                       req->out_offset,
	                       req->shm_reply ? req->out_capacity : bytes,
	                       "out")) == NULL)
		return;
	/* After the replies written there before (fprep__memreg.replies). */
	if (out != NULL)
		(void)atomic_load_explicit(&out->replies, memory_order_acquire);
	if (out == NULL && fprep__slot_reserve_reply(s, msg, bytes) != 0)
		return;
	rv = fprep__reply_tensor_alloc(&rep, out != NULL ? 0 : bytes, &tensor);
	if (rv != 0) {
		snprintf(why, sizeof(why),
		         "tensor of %" PRIu64 " bytes: out of memory", bytes);
		fprep__slot_fail(s, msg, rv, why);
		return;
	}
	job->input =
	        (const uint8_t *)nng_msg_body(msg) + FPREP_REQUEST_HEADER_SIZE;
	job->output = tensor;
	if (in != NULL) {
		job->input = in->base + req->in_offset;
		job->input_pinned = in->pinned;
		job->input_device = fprep__memreg_on_device(in);
		job->in_region = in;
		fprep__regions_use(in);
	}
	if (out != NULL) {
		job->output = out->base + req->out_offset;
		job->output_pinned = out->pinned;
		job->output_device = fprep__memreg_on_device(out);
		job->out_region = out;
		fprep__regions_use(out);
	}
	job->done = slot_job_done;
	job->data = s;
	job->trace = srv->cfg->trace;
	s->req_msg = msg;
	s->rep_msg = rep;
	s->state = FPREP__SLOT_WORK;
	rv = srv->backend->submit(srv->backend, job);
	if (rv != 0) {
		fprep__slot_unuse_regions(s);
		s->req_msg = NULL;
		s->rep_msg = NULL;
		nng_msg_free(msg);
		snprintf(why, sizeof(why), "backend %s refused the job: %s",
		         srv->backend->name, fprep_strerror(rv));
		fprep__slot_fail(s, rep, rv, why);
	}
}

/* slot_doorbell_check tells whether req may come through a doorbell (its
 * reply must fit in the entry); returns 0, or FPREP_EINVAL with why. */
static int slot_doorbell_check(const fprep_request *req, char *why,
                               size_t why_size)
{
	if (req->kind != FPREP_KIND_FRAME && req->kind != FPREP_KIND_ECHO)
		snprintf(why, why_size,
		         "kind: %u through a doorbell: only FRAME and ECHO "
		         "requests come that way",
		         req->kind);
	else if (req->input_loc == FPREP_LOC_INLINE)
		snprintf(why, why_size,
		         "input_loc: inline through a doorbell: the frame "
		         "must be in a region (SHM or CUDA)");
	else if (req->output_loc == FPREP_LOC_INLINE)
		snprintf(why, why_size,
		         "output_loc: inline through a doorbell: the reply in "
		         "the entry carries no payload, so the tensor must go "
		         "to a region (SHM or CUDA)");
	else
		return 0;
	return FPREP_EINVAL;
}

/* slot_doorbell sets up or ends the doorbell a DOORBELL request names. */
static void slot_doorbell(fprep__slot *s, nng_msg *msg)
{
	uint32_t pipe = (uint32_t)nng_pipe_id(nng_msg_get_pipe(msg));
	char why[FPREP_MESSAGE_SIZE];
	fprep_register_request reg;
	int rv;

	rv = fprep_register_request_decode(nng_msg_body(msg), nng_msg_len(msg),
	                                   &reg, why, sizeof(why));
	if (rv == 0)
		rv = fprep__doorbell_set(s->srv, pipe, &reg, why, sizeof(why));
	if (rv != 0) {
		fprep__slot_fail(s, msg, rv, why);
		return;
	}
	fprep__slot_answer(s,
	                   fprep__reply_region(msg, s->kind, s->request_id,
	                                       reg.region_id, ""),
	                   "DOORBELL");
}

/* slot_received handles a request that just arrived in msg. */
static void slot_received(fprep__slot *s, nng_msg *msg)
{
	fprep__server *srv = s->srv;
	char why[FPREP_MESSAGE_SIZE], *info;
	fprep_register_request reg;
	fprep_request req;
	nng_msg *rep;
	int rv;

	s->t_recv_ns = fprep__now_ns();
	fprep__metrics_request(nng_msg_len(msg));
	fprep__ingress_request(&srv->ingress, nng_msg_get_pipe(msg));
	if (fprep__slot_admit(s, msg) != 0)
		return;
	memset(&req, 0, sizeof(req));
	why[0] = '\0';
	rv = fprep_request_decode(nng_msg_body(msg), nng_msg_len(msg),
	                          &srv->cfg->limits, &req, why, sizeof(why));
	s->kind = req.kind;
	s->request_id = req.request_id;
	if (rv != 0) {
		fprep__slot_fail(s, msg, rv,
		                 why[0] != '\0' ? why : fprep_strerror(rv));
		return;
	}
	if (srv->stopping) {
		fprep__slot_fail(s, msg, srv->stop_status, srv->stop_message);
		return;
	}
	if (s->doorbell &&
	    (rv = slot_doorbell_check(&req, why, sizeof(why))) != 0) {
		fprep__slot_fail(s, msg, rv, why);
		return;
	}
	unsigned conn_inflight = atomic_load(&s->conn->inflight);
	if (conn_inflight >= srv->cfg->max_inflight_per_conn) {
		snprintf(why, sizeof(why),
		         "this connection has %u requests in flight: the limit "
		         "is --max-inflight-per-conn %u",
		         conn_inflight, srv->cfg->max_inflight_per_conn);
		fprep__slot_refuse(s, msg, why);
		return;
	}
	atomic_fetch_add(&s->conn->inflight, 1);
	s->counted = 1;
	switch (req.kind) {
	case FPREP_KIND_FRAME:
	case FPREP_KIND_ECHO:
		slot_submit(s, msg, &req);
		return;
	case FPREP_KIND_INFO:
		info = malloc(SLOT_INFO_SIZE);
		if (info == NULL) {
			fprep__slot_fail(s, msg, FPREP_ENOMEM,
			                 "INFO: out of memory");
			return;
		}
		fprep__server_info(srv, info, SLOT_INFO_SIZE);
		rep = fprep__reply_text(msg, req.kind, req.request_id, info);
		free(info);
		fprep__slot_answer(s, rep, "INFO");
		return;
	case FPREP_KIND_REGISTER:
	case FPREP_KIND_UNREGISTER:
	case FPREP_KIND_REGISTER_CUDA:
		/* Checked by fprep_request_decode already: cannot fail. */
		rv = fprep_register_request_decode(nng_msg_body(msg),
		                                   nng_msg_len(msg), &reg, why,
		                                   sizeof(why));
		if (rv != 0)
			fprep__slot_fail(s, msg, rv, why);
		else if (reg.kind == FPREP_KIND_REGISTER)
			slot_register(s, msg, &reg);
		else if (reg.kind == FPREP_KIND_REGISTER_CUDA)
			slot_register_cuda(s, msg, &reg);
		else
			slot_unregister(s, msg, &reg);
		return;
	case FPREP_KIND_DOORBELL:
		slot_doorbell(s, msg);
		return;
	default:
		snprintf(why, sizeof(why), "kind: %u is not supported",
		         req.kind);
		fprep__slot_fail(s, msg, FPREP_EUNSUPPORTED, why);
		return;
	}
}

/* slot_completed handles a job the backend finished. */
static void slot_completed(fprep__slot *s)
{
	fprep__server *srv = s->srv;
	fprep__job *job = &s->job;
	nng_msg *rep = s->rep_msg;
	fprep__trace_times tt = {.rx = s->t_rx_ns, .loop = s->t_recv_ns};
	uint64_t now;
	char why[FPREP_MESSAGE_SIZE + 32];

	if (job->trace)
		tt.seen = fprep__now_ns();

	nng_msg_free(s->req_msg);
	s->req_msg = NULL;
	s->rep_msg = NULL;
	if (job->fatal && srv->exit_status == 0) {
		snprintf(why, sizeof(why), "device failed (%s): %s",
		         fprep_err_name(job->status), job->message);
		fprep__log(FPREP_LOG_ERR,
		           "backend %s on %s: fatal error: %s; failing the "
		           "requests in flight and exiting for a restart",
		           srv->backend->name, srv->device, job->message);
		fprep__server_stop(srv, 1,
		                   job->status != FPREP_OK ? job->status
		                                           : FPREP_EINTERNAL,
		                   why);
	}
	if (job->status == FPREP_OK &&
	    ((job->in_region != NULL && fprep__memreg_broken(job->in_region)) ||
	     (job->out_region != NULL &&
	      fprep__memreg_broken(job->out_region)))) {
		/* The SIGBUS guard caught an access to a region the client
		 * shrank (shm_region.h): what was read or written is not the
		 * client's. */
		job->status = FPREP_EREGION;
		snprintf(job->message, sizeof(job->message),
		         "shared-memory region shrank while the frame was read "
		         "or the tensor written");
	}
	/* The regions stay in use until the reply is handed to nng:
	 * fprep__slot_send may write it into the output region. */
	if (job->status != FPREP_OK) {
		job->message[FPREP_MESSAGE_SIZE - 1] = '\0';
		fprep__slot_fail(s, rep, job->status,
		                 job->message[0] != '\0'
		                         ? job->message
		                         : fprep_strerror(job->status));
		fprep__slot_unuse_regions(s);
		return;
	}
	if (srv->exit_status != 0) {
		fprep__slot_fail(s, rep, srv->stop_status, srv->stop_message);
		fprep__slot_unuse_regions(s);
		return;
	}
	now = fprep__now_ns();
	job->message[0] = '\0';
	if (job->trace) {
		tt.sent = now;
		fprep__trace_text(job->message, sizeof(job->message), &tt, job);
	}
	fprep__reply_tensor_finish(rep, job,
	                           slot_us(s->t_recv_ns, job->t_start_ns),
	                           slot_us(s->t_recv_ns, now));
	srv->served++;
	fprep__log(FPREP_LOG_DEBUG,
	           "request %" PRIu64 " (kind %u, slot %u): %" PRIu64
	           " tensor bytes, %" PRIu64 " us",
	           s->request_id, s->kind, s->index, job->output_size,
	           (now - s->t_recv_ns) / 1000);
	fprep__slot_send(s, rep);
	fprep__slot_unuse_regions(s);
}

/* slot_send_ended ends the request once its reply's send ended with rv:
 * after a failed send the message is still ours. */
static void slot_send_ended(fprep__slot *s, int rv)
{
	if (rv != 0) {
		nng_msg_free(nng_aio_get_msg(s->aio));
		nng_aio_set_msg(s->aio, NULL);
		fprep__log(FPREP_LOG_INFO,
		           "request %" PRIu64 " (kind %u, slot %u): reply not "
		           "sent: %s",
		           s->request_id, s->kind, s->index, nng_strerror(rv));
	}
	fprep__slot_next(s);
}

/* slot_sent_direct ends a request whose reply the backend's thread sent
 * (slot_reply_direct), once that send has ended with rv: what the loop
 * owns is settled as slot_completed and fprep__slot_send would have. */
static void slot_sent_direct(fprep__slot *s, int rv)
{
	fprep__server *srv = s->srv;

	nng_msg_free(s->req_msg);
	s->req_msg = NULL;
	s->rep_msg = NULL;
	s->direct = 0;
	if (s->region_answered) {
		atomic_fetch_sub(&s->conn->region_answered, 1);
		s->region_answered = 0;
	}
	fprep__slot_unuse_regions(s);
	srv->served++;
	fprep__log(FPREP_LOG_DEBUG,
	           "request %" PRIu64 " (kind %u, slot %u): %" PRIu64
	           " tensor bytes, sent from the backend",
	           s->request_id, s->kind, s->index, s->job.output_size);
	slot_send_ended(s, rv);
}

static void slot_aio_done(fprep__slot *s)
{
	fprep__server *srv = s->srv;
	int rv = s->aio_result;

	if (s->state == FPREP__SLOT_WORK && s->direct) {
		slot_sent_direct(s, rv);
		return;
	}
	switch (s->state) {
	case FPREP__SLOT_RECV:
		if (rv == 0) {
			slot_received(s, nng_aio_get_msg(s->aio));
			return;
		}
		if (!srv->stopping)
			fprep__log(FPREP_LOG_WARNING, "slot %u: receive: %s",
			           s->index, nng_strerror(rv));
		if (rv == NNG_ECLOSED) {
			/* The socket is gone: this slot cannot serve. */
			if (!srv->stopping)
				fprep__server_stop(srv, 1, FPREP_ETRANSPORT,
				                   "the socket closed");
		}
		fprep__slot_next(s);
		return;
	case FPREP__SLOT_SEND:
		slot_send_ended(s, rv);
		return;
	default:
		fprep__log(FPREP_LOG_ERR, "slot %u: aio event in state %d",
		           s->index, s->state);
		abort();
	}
}

void fprep__slot_take(fprep__slot *s, nng_msg *msg)
{
	if (s->srv->cfg->trace)
		s->t_rx_ns = fprep__now_ns();
	slot_begin(s);
	slot_received(s, msg);
}

void fprep__slot_event(fprep__slot *s)
{
	if (s->ev.kind == FPREP__EV_DONE)
		slot_completed(s);
	else
		slot_aio_done(s);
}
