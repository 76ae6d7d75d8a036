/*
 * port_nng.c: the nng port (port.h): requests received on the REP
 * socket's contexts, one slot per context, so the number of slots bounds
 * the requests in flight through nng and gives backpressure (a connection
 * with no receiving context stops being read). nng's thread completes a
 * receive and only queues the slot's event; the loop hands the request to
 * the request machine here, with the message it came in (which the
 * request keeps until it ends) and an NNG sink: its reply goes back on
 * the same context. At the request's end the slot receives again, or
 * rests once the port is closed.
 */
#include <inttypes.h>
#include <nng/nng.h>
#include <stdlib.h>

#include "clock.h"
#include "daemon.h"
#include "frameprep/protocol.h"
#include "log.h"
#include "slot_state.h"

/* port_nng_info tells whether msg, a request received, says it is an
 * INFO (its kind field, unchecked: the loop decodes it). */
static int port_nng_info(nng_msg *msg)
{
	const uint8_t *b = msg != NULL ? nng_msg_body(msg) : NULL;

	return b != NULL && nng_msg_len(msg) >= FPREP_REQUEST_HEADER_SIZE &&
	       (b[6] | b[7] << 8) == FPREP_KIND_INFO;
}

/* port_nng_aio_cb: nng's callback for a slot's aio, on nng's thread. An
 * INFO received, and the end of its reply's send, go to the loop before
 * the events queued (evq.h): it waits for no other request's work, such
 * as the allocation of many large tensors for clients that never read
 * them, and a client's next INFO finds the slot of its last one given
 * back. */
static void port_nng_aio_cb(void *arg)
{
	fprep__slot *s = arg;
	int sent = atomic_exchange(&s->t_send_ns, 0) != 0;

	/* A send ended: its peer took the one before (conns.c). */
	if (sent)
		atomic_store_explicit(&s->t_sent_ns, fprep__now_ns(),
		                      memory_order_relaxed);
	if (s->srv->cfg->trace)
		s->t_rx_ns = fprep__now_ns();
	s->ev.kind = FPREP__EV_AIO;
	s->aio_result = nng_aio_result(s->aio);
	/* s->kind was set on the loop before the send began. */
	if (sent ? s->kind == FPREP_KIND_INFO
	         : s->aio_result == 0 && port_nng_info(nng_aio_get_msg(s->aio)))
		fprep__evq_push_first(&s->srv->evq, &s->ev);
	else
		fprep__evq_push(&s->srv->evq, &s->ev);
}

/* port_nng_recv posts a receive on s. */
static void port_nng_recv(fprep__slot *s)
{
	fprep__slot_enter(s, FPREP__SLOT_RECV);
	nng_aio_set_timeout(s->aio, NNG_DURATION_INFINITE);
	nng_ctx_recv(s->ctx, s->aio);
}

static void port_nng_end(fprep__port *port, fprep__slot *s)
{
	fprep__port_nng *p = (fprep__port_nng *)port;

	if (!p->closed) {
		port_nng_recv(s);
		return;
	}
	fprep__slot_enter(s, FPREP__SLOT_IDLE);
}

static void port_nng_close(fprep__port *port)
{
	fprep__port_nng *p = (fprep__port_nng *)port;

	p->closed = 1;
	for (unsigned i = 0; i < p->nslots; i++)
		if (p->slots[i].state == FPREP__SLOT_RECV)
			nng_aio_cancel(p->slots[i].aio);
}

static const fprep__port_ops port_nng_ops = {
        .poll = NULL,
        .spin = NULL,
        .end = port_nng_end,
        .close = port_nng_close,
};

void fprep__port_nng_event(fprep__slot *s)
{
	fprep__server *srv = s->srv;
	int rv = s->aio_result;
	nng_msg *msg;

	FPREP__ASSERT(s->state == FPREP__SLOT_RECV &&
	              s->ev.kind == FPREP__EV_AIO);
	if (rv == 0) {
		msg = nng_aio_get_msg(s->aio);
		nng_aio_set_msg(s->aio, NULL);
		s->req_msg = msg;
		s->req = nng_msg_body(msg);
		s->req_len = nng_msg_len(msg);
		s->pipe = (uint32_t)nng_pipe_id(nng_msg_get_pipe(msg));
		s->sink = (fprep__sink){.kind = FPREP__SINK_NNG};
		fprep__ingress_request(&srv->ingress, nng_msg_get_pipe(msg));
		s->port->take(s);
		return;
	}
	if (!srv->stopping)
		fprep__log(FPREP_LOG_WARNING, "slot %u: receive: %s", s->index,
		           nng_strerror(rv));
	if (rv == NNG_ECLOSED) {
		/* The socket is gone: this slot cannot serve. */
		if (!srv->stopping)
			fprep__shutdown_want(srv, 1, FPREP_ETRANSPORT,
			                     "the socket closed");
		fprep__slot_enter(s, FPREP__SLOT_IDLE);
		return;
	}
	port_nng_end(s->port, s);
}

int fprep__port_nng_open(fprep__port_nng *p, fprep__server *srv,
                         fprep__slot *slots, unsigned n)
{
	int rv;

	p->port.ops = &port_nng_ops;
	p->port.name = "nng";
	p->srv = srv;
	p->slots = slots;
	p->nslots = n;
	for (unsigned i = 0; i < n; i++) {
		fprep__slot *s = &p->slots[i];

		s->port = &p->port;
		rv = nng_aio_alloc(&s->aio, port_nng_aio_cb, s);
		if (rv != 0) {
			fprep__log(FPREP_LOG_ERR, "nng_aio_alloc: %s",
			           nng_strerror(rv));
			return FPREP_ENOMEM;
		}
		rv = nng_ctx_open(&s->ctx, srv->ingress.sock);
		if (rv != 0) {
			fprep__log(FPREP_LOG_ERR, "nng_ctx_open: %s",
			           nng_strerror(rv));
			return FPREP_ETRANSPORT;
		}
	}
	return 0;
}

void fprep__port_nng_start(fprep__port_nng *p)
{
	for (unsigned i = 0; i < p->nslots; i++)
		port_nng_recv(&p->slots[i]);
}

void fprep__port_nng_fini(fprep__port_nng *p)
{
	/* Every aio stops first, so that no callback queues an event
	 * after the messages go. A message still on an aio is a send that
	 * failed or a receive that came after the loop stopped taking
	 * events: both are ours to free (a send that succeeded and a
	 * receive taken leave none). */
	for (unsigned i = 0; i < p->nslots; i++)
		if (p->slots[i].aio != NULL)
			nng_aio_stop(p->slots[i].aio);
	for (unsigned i = 0; i < p->nslots; i++) {
		fprep__slot *s = &p->slots[i];

		if (s->aio == NULL)
			continue;
		if (nng_aio_get_msg(s->aio) != NULL)
			nng_msg_free(nng_aio_get_msg(s->aio));
		nng_aio_free(s->aio);
		s->aio = NULL;
	}
	p->nslots = 0;
}
