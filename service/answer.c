/*
 * answer.c: the end of each request of frameprepd's loop: its reply goes
 * out with a timeout (shortened once shutdown began), an error reply names
 * the reason, and once the send has ended the slot receives again or, when
 * the server is stopping, rests.
 */
#include <inttypes.h>
#include <nng/nng.h>
#include <stdio.h>

#include "log.h"
#include "metrics.h"
#include "reply.h"
#include "server_internal.h"

/* fprep__slot_next ends a request: the slot receives again, or rests once the
 * server is stopping. */
void fprep__slot_next(fprep__slot *s)
{
	fprep__server *srv = s->srv;

	fprep__slot_release(s);
	if (s->doorbell) {
		fprep__doorbell_slot_end(s);
		return;
	}
	if (!srv->stopping) {
		fprep__slot_recv(s);
		return;
	}
	if (s->state != FPREP__SLOT_IDLE)
		srv->active--;
	s->state = FPREP__SLOT_IDLE;
	if (srv->active == 0 && !srv->forcing)
		fprep__server_finish(srv);
}

void fprep__slot_send(fprep__slot *s, nng_msg *msg)
{
	int timeout_ms = s->srv->cfg->send_timeout_ms;

	if (s->srv->stopping && timeout_ms > FPREP__STOP_SEND_MS)
		timeout_ms = FPREP__STOP_SEND_MS;
	if (s->counted) { /* its work is done */
		atomic_fetch_sub(&s->conn->inflight, 1);
		s->counted = 0;
	}
	s->state = FPREP__SLOT_SEND;
	fprep__metrics_reply(nng_msg_body(msg), nng_msg_len(msg), s->job.lane);
	/* A job's regions are in use until here (slot_completed). A reply
	 * written into the region, or into the doorbell entry the request
	 * came from (whether or not the region is sound: there is no other
	 * way back), is not sent through nng: the send ends at once, through
	 * the event queue as a send would. */
	if (s->doorbell) {
		(void)fprep__reply_write(s->db_region, s->db_reply,
		                         nng_msg_body(msg));
		fprep__slot_sent_now(s, msg);
		return;
	}
	if (s->job.out_region != NULL &&
	    fprep__reply_to_region(&s->job, nng_msg_body(msg))) {
		fprep__slot_sent_now(s, msg);
		return;
	}
	nng_aio_set_msg(s->aio, msg);
	nng_aio_set_timeout(s->aio, timeout_ms);
	nng_ctx_send(s->ctx, s->aio);
}

void fprep__slot_sent_now(fprep__slot *s, nng_msg *msg)
{
	nng_msg_free(msg);
	s->aio_result = 0;
	s->ev.kind = FPREP__EV_AIO;
	fprep__evq_push(&s->srv->evq, &s->ev);
}

/* fprep__slot_fail answers the slot's request with an error. spare is a message
 * the caller gives up, reused for the reply when possible. */
void fprep__slot_fail(fprep__slot *s, nng_msg *spare, int status,
                      const char *why)
{
	nng_msg *msg;

	s->srv->failed++;
	fprep__log(FPREP_LOG_INFO,
	           "request %" PRIu64 " (kind %u, slot %u): %s: %s",
	           s->request_id, s->kind, s->index, fprep_err_name(status),
	           why);
	msg = fprep__reply_error(spare, s->kind, s->request_id, status, why);
	if (msg == NULL) {
		fprep__log(FPREP_LOG_WARNING,
		           "request %" PRIu64 ": no memory for the error "
		           "reply: dropped",
		           s->request_id);
		fprep__slot_next(s);
		return;
	}
	fprep__slot_send(s, msg);
}

/* fprep__slot_answer sends rep, a reply built from the request's message (what
 * names the request kind), or fails the request when it could not be
 * built. */
void fprep__slot_answer(fprep__slot *s, nng_msg *rep, const char *what)
{
	char why[FPREP_MESSAGE_SIZE];

	if (rep == NULL) {
		snprintf(why, sizeof(why), "%s: out of memory", what);
		fprep__slot_fail(s, NULL, FPREP_ENOMEM, why);
		return;
	}
	s->srv->served++;
	fprep__slot_send(s, rep);
}
