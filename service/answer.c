/*
 * answer.c: the end of each request of frameprepd's loop. Every reply,
 * whatever thread finished the work, goes through one routine,
 * fprep__answer_reply, as every nng aio ends through nni_aio_finish: it
 * encodes the header, settles the connection's in-flight count and counts
 * the reply in the metrics (which count the header, not the wire bytes),
 * then hands it to the sink the request was given
 * (sink.c): through nng with a timeout (shortened once shutdown began, on
 * the loop), or into shared memory. The routine knows the thread rules:
 * on the loop the slot enters SEND; on the backend thread that finished a
 * job that succeeded it stays in WORK, which the loop does not touch until
 * the slot's next event. An error reply names the reason. Once the
 * delivery has ended (that event), the loop counts it served or failed,
 * releases what the request held (its connection's counts, its region
 * uses, its messages) and its slot
 * goes back to its port, which takes the next request into it or lets it
 * rest.
 */
#include <inttypes.h>
#include <nng/nng.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "daemon.h"
#include "log.h"
#include "metrics.h"
#include "reply.h"
#include "slot_state.h"

/* answer_spare gives up the slot's messages but one, for the reply to
 * reuse: the reply message (a failed tensor), else the request. */
static nng_msg *answer_spare(fprep__slot *s)
{
	nng_msg *spare = s->rep_msg;

	s->rep_msg = NULL;
	if (spare == NULL) {
		spare = s->req_msg;
		s->req_msg = NULL;
		s->req = NULL;
	}
	return spare;
}

/* answer_simple delivers the reply header h (and text through nng).
 * Returns 0, or -1 when no message could be had for it. */
static int answer_simple(fprep__slot *s, const fprep_reply_header *h,
                         const char *text)
{
	nng_msg *msg = NULL;

	if (s->sink.kind == FPREP__SINK_NNG) {
		msg = fprep__reply_take(answer_spare(s), text);
		if (msg == NULL)
			return -1;
	}
	fprep__answer_reply(s, h, msg);
	return 0;
}

/* answer_fail_times gives an error reply the timings known: receipt to
 * now always, and the stages of a job the backend began for this request
 * (its start after this request's receipt; a job left from an earlier
 * request started before it). */
static void answer_fail_times(const fprep__slot *s, fprep_reply_header *h)
{
	const fprep__job *job = &s->job;
	uint64_t now = fprep__now_ns();

	if (s->t_recv_ns == 0)
		return;
	h->t_total_us = fprep__reply_us(s->t_recv_ns, now);
	if (job->t_start_ns < s->t_recv_ns)
		return;
	h->t_queue_us = fprep__reply_us(s->t_recv_ns, job->t_start_ns);
	h->t_compute_us = job->t_compute_us;
	h->t_h2d_us = job->t_h2d_us;
	h->t_kernel_us = job->t_kernel_us;
	h->t_d2h_us = job->t_d2h_us;
	h->t_decode_us = job->t_decode_us;
}

void fprep__answer_fail(fprep__slot *s, int status, const char *why)
{
	fprep_reply_header h;

	fprep__log(FPREP_LOG_INFO,
	           "request %" PRIu64 " (kind %u, slot %u): %s: %s",
	           s->request_id, s->kind, s->index, fprep_err_name(status),
	           why);
	fprep__reply_header_simple(&h, s->kind, s->request_id, status, why, 0,
	                           0);
	answer_fail_times(s, &h);
	if (answer_simple(s, &h, NULL) != 0) {
		fprep__log(FPREP_LOG_WARNING,
		           "request %" PRIu64 ": no memory for the error "
		           "reply: dropped",
		           s->request_id);
		s->srv->failed++; /* no reply counts it */
		fprep__answer_next(s);
	}
}

void fprep__answer_ok(fprep__slot *s, uint32_t region_id, const char *message,
                      const char *text)
{
	fprep_reply_header h;
	char why[FPREP_MESSAGE_SIZE];

	fprep__reply_header_simple(&h, s->kind, s->request_id, FPREP_OK,
	                           message, text != NULL ? strlen(text) : 0,
	                           region_id);
	if (answer_simple(s, &h, text) != 0) {
		snprintf(why, sizeof(why), "%s: out of memory",
		         fprep_kind_name(s->kind) != NULL
		                 ? fprep_kind_name(s->kind)
		                 : "reply");
		fprep__answer_fail(s, FPREP_ENOMEM, why);
	}
}

void fprep__answer_reply(fprep__slot *s, const fprep_reply_header *h,
                         nng_msg *msg)
{
	fprep__server *srv = s->srv;
	int on_loop = pthread_equal(pthread_self(), srv->loop_thread);
	int timeout_ms = s->send_timeout_ms;

	/* The thread rules (daemon.h, [R]): once a request; off the loop
	 * only by the backend thread that finished a job that succeeded,
	 * while the slot is in WORK, which the loop leaves it in until the
	 * slot's next event. */
	FPREP__ASSERT(!s->delivered && s->conn != NULL);
	FPREP__ASSERT(on_loop ||
	              (s->state == FPREP__SLOT_WORK && h->status == FPREP_OK));
	FPREP__ASSERT((msg != NULL) == (s->sink.kind == FPREP__SINK_NNG));
	fprep_reply_encode(h, msg != NULL ? nng_msg_body(msg) : s->rep_head);
	if (s->counted) { /* its work is done */
		atomic_fetch_sub(&s->conn->inflight, 1);
		s->counted = 0;
	}
	/* Counted before the client can see its reply, so that its next
	 * requests, which may reach the loop before this slot's event, do
	 * not find the connection over its bound (fprep__conn_admit);
	 * fprep__conn_release counts it off. */
	if (s->sink.kind != FPREP__SINK_NNG)
		atomic_fetch_add(&s->conn->region_answered, 1);
	s->status = (int)h->status;
	fprep__metrics_reply(
	        h, msg != NULL ? nng_msg_len(msg) : FPREP_REPLY_HEADER_SIZE,
	        s->job.lane);
	/* Ended before the client can see its reply, so that a scrape that
	 * follows the reply never finds this request in flight. */
	fprep__metrics_request_end();
	if (on_loop) {
		fprep__slot_enter(s, FPREP__SLOT_SEND);
		if (srv->stopping && timeout_ms > FPREP__STOP_SEND_MS)
			timeout_ms = FPREP__STOP_SEND_MS;
	}
	(void)fprep__sink_deliver(s, msg, timeout_ms);
}

/* answer_unuse_regions ends the job's use of its regions: they stay in
 * use until the request ends, since its sink may be the output region. */
static void answer_unuse_regions(fprep__slot *s)
{
	if (s->job.in_region != NULL)
		fprep__regions_unuse(&s->srv->regions, s->job.in_region);
	if (s->job.out_region != NULL)
		fprep__regions_unuse(&s->srv->regions, s->job.out_region);
	s->job.in_region = NULL;
	s->job.out_region = NULL;
}

void fprep__answer_next(fprep__slot *s)
{
	FPREP__LOOP_ONLY(s->srv);
	/* Counted as the slot leaves WORK or SEND, so that INFO never
	 * counts a request both in flight and served. */
	if (s->delivered && s->status == FPREP_OK)
		s->srv->served++;
	else if (s->delivered)
		s->srv->failed++;
	fprep__conn_release(s);
	answer_unuse_regions(s);
	s->delivered = 0;
	if (s->req_msg != NULL)
		nng_msg_free(s->req_msg);
	if (s->rep_msg != NULL)
		nng_msg_free(s->rep_msg);
	s->req_msg = NULL;
	s->req = NULL;
	s->rep_msg = NULL;
	s->port->ops->end(s->port, s);
}
