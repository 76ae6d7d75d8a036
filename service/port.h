/*
 * port.h: the ways requests come into frameprepd's loop, modelled on nng's
 * transport interface (nni_sp_pipe_ops): each way in is a port, which owns
 * its own state and offers the loop the same few operations. There are two:
 *
 *   nng        requests received on the REP socket's contexts
 *              (port_nng.c): nng's threads complete the receives, and the
 *              loop is told through its event queue; nothing to poll.
 *   doorbells  requests posted into clients' shared memory (protocol.h,
 *              "Doorbells"; port_doorbell.c): the loop polls the areas
 *              while it spins, and a waker thread rings it while it sleeps.
 *
 * A port takes a request into a slot of its own (the request's bytes, its
 * connection and its reply's sink set: daemon.h) and hands it to the
 * request machine through take. When the request has ended (its reply
 * delivered or dropped), the machine gives the slot back through end.
 * The loop's spin asks each port to poll, and tells each whether it
 * spins; it knows nothing of how a port finds its requests.
 */
#ifndef FPREP_SERVICE_PORT_H
#define FPREP_SERVICE_PORT_H

typedef struct fprep__port fprep__port;
typedef struct fprep__slot fprep__slot;

/* fprep__port_ops: what a port does for the loop. Every operation runs on
 * the loop thread. */
typedef struct fprep__port_ops {
	/* poll takes the requests waiting now and hands each to take;
	 * returns how many it took. NULL: the port's requests come through
	 * the event queue. */
	unsigned (*poll)(fprep__port *p);
	/* spin tells the port that the loop polls it from now on (on = 1)
	 * or sleeps in epoll (0). NULL: it does not care. */
	void (*spin)(fprep__port *p, int on);
	/* end takes back s, a slot of this port whose request ended: the
	 * port takes its next request into it, or lets it rest. */
	void (*end)(fprep__port *p, fprep__slot *s);
	/* close stops taking requests (shutdown): a request the port holds
	 * but has not handed on ends now; those handed on are answered. */
	void (*close)(fprep__port *p);
} fprep__port_ops;

/* fprep__port_take_cb: the request machine's intake (slot.c), told of
 * every request a port took into s. Loop thread. */
typedef void (*fprep__port_take_cb)(fprep__slot *s);

/* fprep__port: embedded first in each port's own state. */
struct fprep__port {
	const fprep__port_ops *ops;
	const char *name;         /* "nng", "doorbells": for logs */
	fprep__port_take_cb take; /* set by the server before any request */
};

#endif /* FPREP_SERVICE_PORT_H */
