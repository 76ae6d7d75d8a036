/*
 * sink.c: where every reply of frameprepd leaves (daemon.h, fprep__sink).
 *
 * A request's sink is chosen once, when it is taken and accepted; this
 * file alone writes a reply to it, called by the reply's one owner,
 * fprep__answer_reply (answer.c), on the thread that owns the reply (the
 * loop, or the backend thread that finished the job: daemon.h, [R]). An nng
 * reply is sent on the slot's context, with a timeout; a reply into shared
 * memory (the output region's header, or the doorbell entry the request
 * came from) is the header alone, written with the request_id last
 * (reply.c, fprep__reply_write), and its end reaches the loop through the
 * event queue as a send's would, so that the loop ends every request the
 * same way. A region the SIGBUS guard caught cannot be written: its
 * request came through nng, so its reply goes back that way; an entry has
 * no other way back, and nobody can read it any more.
 */
#include <inttypes.h>
#include <nng/nng.h>
#include <string.h>

#include "clock.h"
#include "daemon.h"
#include "log.h"
#include "reply.h"

/* sink_sent queues s's event: the reply is where it goes. */
static void sink_sent(fprep__slot *s)
{
	s->aio_result = 0;
	s->ev.kind = FPREP__EV_SENT;
	fprep__evq_push(&s->srv->evq, &s->ev);
}

/* sink_send sends msg on s's context. */
static void sink_send(fprep__slot *s, nng_msg *msg, int timeout_ms)
{
	FPREP__ASSERT(s->aio != NULL);
	atomic_store_explicit(&s->t_send_ns, fprep__now_ns(),
	                      memory_order_relaxed);
	nng_aio_set_msg(s->aio, msg);
	nng_aio_set_timeout(s->aio, timeout_ms);
	nng_ctx_send(s->ctx, s->aio);
}

int fprep__sink_deliver(fprep__slot *s, nng_msg *msg, int timeout_ms)
{
	nng_msg *hdr;

	FPREP__ASSERT(!s->delivered);
	s->delivered = 1;
	switch (s->sink.kind) {
	case FPREP__SINK_NNG:
		FPREP__ASSERT(msg != NULL);
		sink_send(s, msg, timeout_ms);
		return 0;
	case FPREP__SINK_ENTRY:
		FPREP__ASSERT(msg == NULL);
		(void)fprep__reply_write(s->sink.region, s->sink.area,
		                         s->rep_head);
		sink_sent(s);
		return 1;
	default:
		FPREP__ASSERT(s->sink.kind == FPREP__SINK_REGION);
		FPREP__ASSERT(msg == NULL);
		if (fprep__reply_write(s->sink.region, s->sink.area,
		                       s->rep_head)) {
			sink_sent(s);
			return 1;
		}
		if (nng_msg_alloc(&hdr, FPREP_REPLY_HEADER_SIZE) != 0) {
			fprep__log(FPREP_LOG_WARNING,
			           "request %" PRIu64 ": no memory for the "
			           "reply: dropped",
			           s->request_id);
			sink_sent(s);
			return 0;
		}
		memcpy(nng_msg_body(hdr), s->rep_head, FPREP_REPLY_HEADER_SIZE);
		sink_send(s, hdr, timeout_ms);
		return 0;
	}
}
