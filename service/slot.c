/*
 * slot.c: the request machine of frameprepd's loop. A port (port.h) takes
 * a request into one of its slots and hands it here (fprep__slot_take),
 * with the request's bytes, its connection and the sink its reply goes to
 * (daemon.h). A request is admitted for its connection (conns.c), decoded
 * and validated before anything is allocated, and then
 *
 *   WORK    a FRAME or ECHO: its job was submitted to the backend; an nng
 *           reply message, header space plus the tensor, is already
 *           allocated and the backend writes the tensor straight into it
 *           (or into the request's output region)
 *   REGION  a REGISTER or UNREGISTER is with the regions module
 *           (regions.c), which calls back once it is done
 *   SEND    its reply (tensor, INFO text or error) is being delivered
 *           (answer.c, sink.c)
 *
 * and once the delivery has ended the slot goes back to its port
 * (fprep__answer_next). A slot has at most one event queued at a time,
 * because it has at most one operation outstanding. A job that succeeded
 * is answered from the backend's thread that finished it, which saves the
 * reply a hand-off to the loop and back (tens of microseconds at every
 * request); the rest come back to the loop (slot_completed). Either way
 * the reply goes through the one routine, fprep__answer_reply (answer.c),
 * and the loop ends the request when that delivery's event arrives.
 */
#include <inttypes.h>
#include <nng/nng.h>
#include <nng/transport/ipc/ipc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "daemon.h"
#include "log.h"
#include "metrics.h"
#include "reply.h"
#include "slot_state.h"
#include "trace.h"

#define SLOT_INFO_SIZE 4096

/* slot_sink_broken tells whether the SIGBUS guard caught a region the
 * job or its reply uses. Any thread. */
static int slot_sink_broken(const fprep__slot *s)
{
	const fprep__job *job = &s->job;

	return (s->sink.region != NULL &&
	        fprep__memreg_broken(s->sink.region)) ||
	       (job->in_region != NULL &&
	        fprep__memreg_broken(job->in_region)) ||
	       (job->out_region != NULL &&
	        fprep__memreg_broken(job->out_region));
}

/* slot_reply_tensor answers s's job, which succeeded: the header of its
 * tensor (timings from the request's receipt, the --trace text with
 * seen_ns, when its completion was taken) with the reply message made
 * when it was submitted (NNG sink). On the loop, or the backend's thread
 * that finished the job (fprep__answer_reply's rules); after it that thread
 * must not touch s, whose event may already be with the loop. */
static void slot_reply_tensor(fprep__slot *s, uint64_t seen_ns)
{
	fprep__job *job = &s->job;
	fprep_reply_header h;
	nng_msg *msg = s->rep_msg;
	uint64_t now = fprep__now_ns();

	job->message[0] = '\0';
	if (job->trace) {
		fprep__trace_times tt = {.rx = s->t_rx_ns,
		                         .loop = s->t_recv_ns,
		                         .seen = seen_ns,
		                         .sent = now};
		fprep__trace_text(job->message, sizeof(job->message), &tt, job);
	}
	fprep__reply_header_tensor(
	        &h, job, fprep__reply_us(s->t_recv_ns, job->t_start_ns),
	        fprep__reply_us(s->t_recv_ns, now));
	fprep__log(FPREP_LOG_DEBUG,
	           "request %" PRIu64 " (kind %u, slot %u): %" PRIu64
	           " tensor bytes, %" PRIu32 " us",
	           s->request_id, s->kind, s->index, job->output_size,
	           h.t_total_us);
	s->rep_msg = NULL;
	fprep__answer_reply(s, &h, msg);
}

/* slot_job_done: the backend's completion callback, on its thread. A job
 * that succeeded is answered here; errors, fatal jobs, regions the SIGBUS
 * guard caught and a stopping server take the loop's way
 * (slot_completed). */
static void slot_job_done(fprep__job *job)
{
	fprep__slot *s = job->data;
	fprep__server *srv = s->srv;

	/* After a sticky device error no later completion is trusted: the
	 * loop answers them all (slot_completed). The backend's threads see
	 * this before the loop does. */
	if (job->fatal)
		atomic_store(&srv->no_direct, 1);
	if (job->status == FPREP_OK && !job->fatal &&
	    !atomic_load(&srv->no_direct) && !slot_sink_broken(s)) {
		slot_reply_tensor(s, fprep__now_ns());
		return;
	}
	s->ev.kind = FPREP__EV_DONE;
	fprep__evq_push(&srv->evq, &s->ev);
}

/* slot_region_done answers a REGISTER or UNREGISTER once the regions
 * module is done with it; on the loop thread. */
static void slot_region_done(void *data, int status, uint32_t id,
                             const char *message)
{
	fprep__slot *s = data;
	fprep__server *srv = s->srv;
	uint64_t uid;
	char why[FPREP_MESSAGE_SIZE];

	FPREP__ASSERT(s->state == FPREP__SLOT_REGION && s->req_msg != NULL);
	if (status != FPREP_OK) {
		fprep__answer_fail(s, status, message);
		return;
	}
	if (s->kind == FPREP_KIND_UNREGISTER) {
		fprep__answer_ok(s, 0, message, NULL);
		return;
	}
	if (nng_pipe_get_uint64(nng_msg_get_pipe(s->req_msg),
	                        NNG_OPT_IPC_PEER_UID, &uid) != 0) {
		/* The connection closed before the registration began (its
		 * close event came first): nobody can use the region. */
		fprep__regions_unregister(&srv->regions, id, s->pipe, NULL,
		                          NULL, why, sizeof(why));
		fprep__answer_fail(s, FPREP_ECLOSED,
		                   "connection closed during registration");
		return;
	}
	fprep__answer_ok(s, id, message, NULL);
}

/* slot_park leaves s waiting for the regions module (rv 0), or answers
 * its request with the error rv it refused it with. */
static void slot_park(fprep__slot *s, int rv, const char *why)
{
	if (rv != 0) {
		fprep__answer_fail(s, rv, why);
		return;
	}
	fprep__slot_enter(s, FPREP__SLOT_REGION);
}

/* slot_peer_uid finds the uid of the peer of s's nng connection: 0, or
 * -1 after answering with why_not when the connection has none (not
 * ipc://). REGISTER and REGISTER_CUDA come through nng alone. */
static int slot_peer_uid(fprep__slot *s, uint64_t *uid, const char *why_not)
{
	FPREP__ASSERT(s->req_msg != NULL);
	if (nng_pipe_get_uint64(nng_msg_get_pipe(s->req_msg),
	                        NNG_OPT_IPC_PEER_UID, uid) == 0)
		return 0;
	fprep__answer_fail(s, FPREP_EUNSUPPORTED, why_not);
	return -1;
}

/* slot_register hands a REGISTER to the regions module, which answers
 * through slot_region_done. */
static void slot_register(fprep__slot *s, const fprep_register_request *req)
{
	char why[FPREP_MESSAGE_SIZE];
	uint64_t uid;
	int rv;

	if (slot_peer_uid(s, &uid,
	                  "REGISTER: shared memory needs an ipc:// connection "
	                  "(the peer's uid is unknown on this one)") != 0)
		return;
	rv = fprep__regions_register(&s->srv->regions, req->region_name,
	                             req->region_size, s->pipe, uid,
	                             slot_region_done, s, why, sizeof(why));
	slot_park(s, rv, why);
}

/* slot_register_cuda hands a REGISTER_CUDA to the regions module, which
 * answers through slot_region_done. Like shared memory, only over ipc://:
 * a handle means nothing on another host. */
static void slot_register_cuda(fprep__slot *s,
                               const fprep_register_request *req)
{
	char why[FPREP_MESSAGE_SIZE];
	uint64_t uid;
	int rv;

	if (slot_peer_uid(s, &uid,
	                  "REGISTER_CUDA: CUDA regions need an ipc:// "
	                  "connection (a handle means nothing on another "
	                  "host)") != 0)
		return;
	rv = fprep__regions_register_cuda(&s->srv->regions, req, s->pipe, uid,
	                                  slot_region_done, s, why,
	                                  sizeof(why));
	slot_park(s, rv, why);
}

/* slot_unregister hands an UNREGISTER to the regions module: the reply
 * goes once the daemon no longer touches the region. */
static void slot_unregister(fprep__slot *s, const fprep_register_request *req)
{
	fprep__server *srv = s->srv;
	char why[FPREP_MESSAGE_SIZE];
	int rv;

	fprep__doorbells_drop_region(&srv->doorbells, req->region_id, s->pipe);
	rv = fprep__regions_unregister(&srv->regions, req->region_id, s->pipe,
	                               slot_region_done, s, why, sizeof(why));
	slot_park(s, rv, why);
}

/* slot_sink_region turns s's NNG sink into its output region's header
 * when the request asks for its reply there (shm_reply) and the region is
 * shared memory (protocol.h, "The reply in shared memory"): the last
 * FPREP_REPLY_HEADER_SIZE bytes of out_capacity, inside the region and
 * 8-byte aligned (protocol.c and fprep__place_output checked). */
static void slot_sink_region(fprep__slot *s, const fprep_request *req,
                             fprep__memreg *out)
{
	if (s->sink.kind != FPREP__SINK_NNG || !req->shm_reply ||
	    fprep__memreg_on_device(out))
		return;
	s->sink.kind = FPREP__SINK_REGION;
	s->sink.region = out;
	s->sink.area = out->base + req->out_offset + req->out_capacity -
	               FPREP_REPLY_HEADER_SIZE;
}

/* slot_element_xfs writes the transform records of a ROIS or BATCH
 * request's elements (protocol.h) at dst, in its nng reply. */
static void slot_element_xfs(const fprep_request *req, const uint8_t *table,
                             uint8_t *dst)
{
	fprep_element el;
	fprep_element_xf xf;

	for (uint32_t k = 0; k < req->elements; k++) {
		fprep_element_get(table, k, &el);
		fprep_element_transform(req, &el, &xf);
		fprep_element_xf_encode(
		        &xf, dst + (size_t)k * FPREP_ELEMENT_XF_SIZE);
	}
}

/* slot_submit starts a FRAME, ECHO, ROIS or BATCH request: chooses its
 * reply's sink, allocates an nng reply (with room for an inline tensor,
 * and a ROIS or BATCH's transforms, written here) when it goes that way,
 * and hands the job to the backend. */
static void slot_submit(fprep__slot *s, const fprep_request *req)
{
	fprep__server *srv = s->srv;
	fprep__job *job = &s->job;
	char why[FPREP_MESSAGE_SIZE];
	uint64_t bytes, out_len, xf_len = 0;
	uint8_t *tensor = NULL;
	int rv;

	fprep__memreg *in = NULL, *out = NULL;

	/* Shape, size and transform are decided here, once. */
	memset(job, 0, sizeof(*job));
	job->req = *req;
	/* The backend's threads read these: a copy SIGHUP cannot change. */
	s->limits = srv->cfg->limits;
	job->limits = &s->limits;
	rv = fprep__job_plan(job);
	if (rv != 0) {
		fprep__answer_fail(s, rv, "tensor shape: invalid request");
		return;
	}
	bytes = job->output_size;
	out_len = req->shm_reply ? req->out_capacity : bytes;
	/* ROIS and BATCH: the elements read input_span bytes (a BATCH's
	 * frames), and the reply carries their transforms after the tensor. */
	if (req->elements > 0)
		xf_len = (uint64_t)req->elements * FPREP_ELEMENT_XF_SIZE;
	if (req->input_loc != FPREP_LOC_INLINE &&
	    (in = fprep__place_region(
	             s, req->input_loc, req->in_region, req->in_offset,
	             req->elements > 0 ? req->input_span : req->input_size,
	             "in")) == NULL)
		return;
	if (req->output_loc != FPREP_LOC_INLINE &&
	    (out = fprep__place_output(s, req->output_loc, req->out_region,
	                               req->out_offset, out_len)) == NULL)
		return;
	if (out == NULL &&
	    fprep__conn_reserve_reply(s, bytes, why, sizeof(why)) != 0) {
		fprep__answer_fail(s, FPREP_EBUSY, why);
		return;
	}
	if (out != NULL)
		slot_sink_region(s, req, out);
	if (s->sink.kind == FPREP__SINK_NNG) {
		rv = fprep__reply_tensor_alloc(
		        &s->rep_msg, (out != NULL ? 0 : bytes) + xf_len,
		        &tensor);
		if (rv != 0) {
			snprintf(why, sizeof(why),
			         "tensor of %" PRIu64 " bytes: out of memory",
			         bytes);
			fprep__answer_fail(s, rv, why);
			return;
		}
	}
	if (req->elements > 0) {
		/* No SHM_REPLY, no doorbell (protocol.c, slot_entry_check). */
		FPREP__ASSERT(s->sink.kind == FPREP__SINK_NNG &&
		              tensor != NULL);
		job->table = s->req + FPREP_REQUEST_HEADER_SIZE;
		/* Worked out once: the reply carries them, the job too. */
		slot_element_xfs(req, job->table,
		                 tensor + (out != NULL ? 0 : bytes));
		job->xfs = tensor + (out != NULL ? 0 : bytes);
	}
	job->input = s->req + fprep_request_payload_offset(req);
	job->output = tensor;
	if (in != NULL) {
		job->input = in->base + req->in_offset;
		job->input_pinned = in->pinned;
		job->input_device = fprep__memreg_on_device(in);
		job->in_region = in;
		fprep__regions_use(in);
	}
	if (out != NULL)
		fprep__place_job_output(s, out, req->out_offset);
	job->done = slot_job_done;
	job->data = s;
	job->trace = srv->cfg->trace;
	job->conn = s->pipe;
	job->uid = s->conn != NULL && s->conn->uid != NULL ? s->conn->uid->uid
	                                                   : FPREP__UID_UNKNOWN;
	fprep__slot_enter(s, FPREP__SLOT_WORK);
	rv = srv->backend->submit(srv->backend, job);
	if (rv != 0) {
		snprintf(why, sizeof(why), "backend %s refused the job: %s",
		         srv->backend->name, fprep_strerror(rv));
		/* Written to its sink while the regions are in use (until
		 * the request ends: fprep__answer_next). */
		fprep__answer_fail(s, rv, why);
	}
}

/* slot_doorbell sets up or ends the doorbell a DOORBELL request names. */
static void slot_doorbell(fprep__slot *s)
{
	char why[FPREP_MESSAGE_SIZE];
	fprep_register_request reg;
	int rv;

	rv = fprep_register_request_decode(s->req, s->req_len, &reg, why,
	                                   sizeof(why));
	if (rv == 0)
		rv = fprep__doorbells_set(&s->srv->doorbells, s->pipe, &reg,
		                          why, sizeof(why));
	if (rv != 0) {
		fprep__answer_fail(s, rv, why);
		return;
	}
	fprep__answer_ok(s, reg.region_id, "", NULL);
}

/* slot_info answers an INFO request. */
static void slot_info(fprep__slot *s)
{
	char *info = malloc(SLOT_INFO_SIZE);

	if (info == NULL) {
		fprep__answer_fail(s, FPREP_ENOMEM, "INFO: out of memory");
		return;
	}
	fprep__info_text(s->srv, info, SLOT_INFO_SIZE);
	fprep__answer_ok(s, 0, "", info);
	free(info);
}

/* slot_regions hands a REGISTER, UNREGISTER or REGISTER_CUDA on. */
static void slot_regions(fprep__slot *s)
{
	char why[FPREP_MESSAGE_SIZE];
	fprep_register_request reg;
	int rv;

	/* Checked by fprep_request_decode already: cannot fail. */
	rv = fprep_register_request_decode(s->req, s->req_len, &reg, why,
	                                   sizeof(why));
	if (rv != 0)
		fprep__answer_fail(s, rv, why);
	else if (reg.kind == FPREP_KIND_REGISTER)
		slot_register(s, &reg);
	else if (reg.kind == FPREP_KIND_REGISTER_CUDA)
		slot_register_cuda(s, &reg);
	else
		slot_unregister(s, &reg);
}

void fprep__slot_take(fprep__slot *s)
{
	fprep__server *srv = s->srv;
	char why[FPREP_MESSAGE_SIZE];
	fprep_request req;
	unsigned inflight;
	int rv;

	FPREP__LOOP_ONLY(srv);
	FPREP__ASSERT(s->state == FPREP__SLOT_RECV && s->req != NULL &&
	              s->conn == NULL && s->rep_msg == NULL && !s->delivered);
	s->kind = 0;
	s->request_id = 0;
	/* Its reply's send, from whichever thread answers it: a copy that
	 * SIGHUP cannot change meanwhile. */
	s->send_timeout_ms = srv->cfg->send_timeout_ms;
	s->t_recv_ns = fprep__now_ns();
	fprep__metrics_request(s->req_len);
	if (fprep__conn_admit(s) != 0) {
		fprep__answer_next(s); /* dropped: its connection is closed */
		return;
	}
	memset(&req, 0, sizeof(req));
	why[0] = '\0';
	rv = fprep_request_decode(s->req, s->req_len, &srv->cfg->limits, &req,
	                          why, sizeof(why));
	s->kind = req.kind;
	s->request_id = req.request_id;
	if (rv != 0) {
		const char *text = why[0] != '\0' ? why : fprep_strerror(rv);

		/* A stream's numbered request is refused in its turn. */
		if (!fprep__streams_refuse(s, rv, text))
			fprep__answer_fail(s, rv, text);
		return;
	}
	/* While draining, INFO is still answered (its health lines say
	 * draining); every other request gets stop_status. */
	if (srv->stopping && req.kind != FPREP_KIND_INFO) {
		fprep__answer_fail(s, srv->stop_status, srv->stop_message);
		return;
	}
	if (s->sink.kind == FPREP__SINK_ENTRY &&
	    (rv = fprep_doorbell_check(&req, why, sizeof(why))) != 0) {
		fprep__answer_fail(s, rv, why);
		return;
	}
	inflight = atomic_load(&s->conn->inflight);
	if (inflight >= srv->cfg->max_inflight_per_conn) {
		snprintf(why, sizeof(why),
		         "this connection has %u requests in flight: the limit "
		         "is --max-inflight-per-conn %u",
		         inflight, srv->cfg->max_inflight_per_conn);
		if (!fprep__streams_refuse(s, FPREP_EBUSY, why))
			fprep__answer_fail(s, FPREP_EBUSY, why);
		return;
	}
	rv = fprep__conn_share(s, why, sizeof(why));
	if (rv < 0) {
		fprep__answer_next(s); /* dropped: its connection is closed */
		return;
	}
	if (rv != 0) {
		fprep__answer_fail(s, rv, why);
		return;
	}
	atomic_fetch_add(&s->conn->inflight, 1);
	s->counted = 1;
	switch (req.kind) {
	case FPREP_KIND_FRAME:
	case FPREP_KIND_ECHO:
	case FPREP_KIND_ROIS:
	case FPREP_KIND_BATCH:
		slot_submit(s, &req);
		return;
	case FPREP_KIND_INFO:
		slot_info(s);
		return;
	case FPREP_KIND_REGISTER:
	case FPREP_KIND_UNREGISTER:
	case FPREP_KIND_REGISTER_CUDA:
		slot_regions(s);
		return;
	case FPREP_KIND_DOORBELL:
		slot_doorbell(s);
		return;
	case FPREP_KIND_STREAM_OPEN:
	case FPREP_KIND_STREAM_PACKET:
	case FPREP_KIND_STREAM_FLUSH:
	case FPREP_KIND_STREAM_CLOSE:
		fprep__streams_take(s, &req);
		return;
	default:
		snprintf(why, sizeof(why), "kind: %u is not supported",
		         req.kind);
		fprep__answer_fail(s, FPREP_EUNSUPPORTED, why);
		return;
	}
}

/* slot_completed handles a job the backend finished and did not answer
 * itself (slot_job_done). */
static void slot_completed(fprep__slot *s)
{
	fprep__server *srv = s->srv;
	fprep__job *job = &s->job;
	uint64_t seen_ns = fprep__now_ns();
	char why[FPREP_MESSAGE_SIZE + 32];

	/* The frame was read: an nng request's message goes now (an error
	 * reply reuses the reply message, or allocates). */
	if (s->req_msg != NULL) {
		nng_msg_free(s->req_msg);
		s->req_msg = NULL;
		s->req = NULL;
	}
	if (job->fatal && srv->exit_status == 0) {
		snprintf(why, sizeof(why), "device failed (%s): %s",
		         fprep_err_name(job->status), job->message);
		fprep__log(FPREP_LOG_ERR,
		           "backend %s on %s: fatal error: %s; failing the "
		           "requests in flight and exiting for a restart",
		           srv->backend->name, srv->device, job->message);
		fprep__shutdown_want(srv, 1,
		                     job->status != FPREP_OK ? job->status
		                                             : FPREP_EINTERNAL,
		                     why);
	}
	if (job->status == FPREP_OK && slot_sink_broken(s)) {
		/* The SIGBUS guard caught an access to a region the client
		 * shrank (shm_region.h): what was read or written is not the
		 * client's. */
		job->status = FPREP_EREGION;
		snprintf(job->message, sizeof(job->message),
		         "shared-memory region shrank while the frame was read "
		         "or the tensor written");
	}
	/* The regions stay in use until the request ends
	 * (fprep__answer_next): its sink may be the output region. */
	if (job->status != FPREP_OK) {
		job->message[FPREP_MESSAGE_SIZE - 1] = '\0';
		fprep__answer_fail(s, job->status,
		                   job->message[0] != '\0'
		                           ? job->message
		                           : fprep_strerror(job->status));
		return;
	}
	if (srv->exit_status != 0) {
		fprep__answer_fail(s, srv->stop_status, srv->stop_message);
		return;
	}
	slot_reply_tensor(s, seen_ns);
}

/* slot_send_ended ends the request once its reply's delivery ended with rv
 * (an nng send: after a failed one the message is still ours). */
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
	fprep__answer_next(s);
}

void fprep__slot_event(fprep__slot *s)
{
	FPREP__LOOP_ONLY(s->srv);
	if (s->ev.kind == FPREP__EV_DONE) {
		FPREP__ASSERT(s->state == FPREP__SLOT_WORK && !s->delivered);
		if (s->job.video != NULL)
			fprep__streams_done(s); /* a stream's job */
		else
			slot_completed(s);
		return;
	}
	/* The delivery ended: from the loop (SEND) or from the backend's
	 * thread that finished the job (still WORK). */
	FPREP__ASSERT(s->delivered && (s->state == FPREP__SLOT_SEND ||
	                               s->state == FPREP__SLOT_WORK));
	slot_send_ended(s, s->ev.kind == FPREP__EV_SENT ? 0 : s->aio_result);
}
