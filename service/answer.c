/*
 * answer.c: the end of each request of frameprepd's loop. Its reply is
 * built from a header (which the metrics count, not the wire bytes) and
 * delivered to the sink the request was given (sink.c): through nng with
 * a timeout (shortened once shutdown began), or into shared memory. An
 * error reply names the reason. Once the delivery has ended, the request's
 * counts are released and its slot goes back to its port, which takes the
 * next request into it or lets it rest.
 */
#include <inttypes.h>
#include <nng/nng.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "daemon.h"
#include "log.h"
#include "metrics.h"
#include "reply.h"

/* answer_timeout_ms: how long an nng send may take. */
static int answer_timeout_ms(const fprep__slot *s)
{
	int timeout_ms = s->srv->cfg->send_timeout_ms;

	if (s->srv->stopping && timeout_ms > FPREP__STOP_SEND_MS)
		timeout_ms = FPREP__STOP_SEND_MS;
	return timeout_ms;
}

/* answer_deliver delivers s's reply, whose header is h: msg (the whole
 * reply) through an NNG sink, else rep_head. */
static void answer_deliver(fprep__slot *s, const fprep_reply_header *h,
                           nng_msg *msg)
{
	FPREP__LOOP_ONLY(s->srv);
	if (s->counted) { /* its work is done */
		atomic_fetch_sub(&s->conn->inflight, 1);
		s->counted = 0;
	}
	fprep__slot_enter(s, FPREP__SLOT_SEND);
	fprep__metrics_reply(
	        h, msg != NULL ? nng_msg_len(msg) : FPREP_REPLY_HEADER_SIZE,
	        s->job.lane);
	/* Ended before the client can see its reply, so that a scrape that
	 * follows the reply never finds this request in flight (as in
	 * slot_reply_direct). */
	if (!s->ended) {
		fprep__metrics_request_end();
		s->ended = 1;
	}
	(void)fprep__sink_deliver(s, msg, answer_timeout_ms(s));
}

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
		msg = fprep__reply_msg(answer_spare(s), h, text);
		if (msg == NULL)
			return -1;
	} else {
		FPREP__ASSERT(s->rep_msg == NULL);
		fprep_reply_encode(h, s->rep_head);
	}
	answer_deliver(s, h, msg);
	return 0;
}

/* answer_us: microseconds from from_ns to to_ns, at least 1 (0 in a
 * reply's t_total_us means "not timed"), at most UINT32_MAX. */
static uint32_t answer_us(uint64_t from_ns, uint64_t to_ns)
{
	uint64_t us = to_ns > from_ns ? (to_ns - from_ns) / 1000 : 0;

	return us == 0 ? 1 : us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
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
	h->t_total_us = answer_us(s->t_recv_ns, now);
	if (job->t_start_ns < s->t_recv_ns)
		return;
	h->t_queue_us = answer_us(s->t_recv_ns, job->t_start_ns);
	h->t_compute_us = job->t_compute_us;
	h->t_h2d_us = job->t_h2d_us;
	h->t_kernel_us = job->t_kernel_us;
	h->t_d2h_us = job->t_d2h_us;
	h->t_decode_us = job->t_decode_us;
}

void fprep__slot_fail(fprep__slot *s, int status, const char *why)
{
	fprep_reply_header h;

	s->srv->failed++;
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
		fprep__slot_next(s);
	}
}

void fprep__slot_answer(fprep__slot *s, uint32_t region_id, const char *message,
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
		fprep__slot_fail(s, FPREP_ENOMEM, why);
		return;
	}
	s->srv->served++;
}

void fprep__slot_reply(fprep__slot *s, const fprep_reply_header *h)
{
	nng_msg *msg = NULL;

	if (s->sink.kind == FPREP__SINK_NNG) {
		msg = s->rep_msg;
		s->rep_msg = NULL;
		FPREP__ASSERT(msg != NULL);
		fprep_reply_encode(h, nng_msg_body(msg));
	} else {
		fprep_reply_encode(h, s->rep_head);
	}
	answer_deliver(s, h, msg);
}

void fprep__slot_unuse_regions(fprep__slot *s)
{
	if (s->job.in_region != NULL)
		fprep__regions_unuse(&s->srv->regions, s->job.in_region);
	if (s->job.out_region != NULL)
		fprep__regions_unuse(&s->srv->regions, s->job.out_region);
	s->job.in_region = NULL;
	s->job.out_region = NULL;
}

void fprep__slot_next(fprep__slot *s)
{
	FPREP__LOOP_ONLY(s->srv);
	fprep__conn_release(s);
	if (s->req_msg != NULL)
		nng_msg_free(s->req_msg);
	if (s->rep_msg != NULL)
		nng_msg_free(s->rep_msg);
	s->req_msg = NULL;
	s->req = NULL;
	s->rep_msg = NULL;
	s->port->ops->end(s->port, s);
}
