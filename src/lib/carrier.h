/*
 * carrier.h: the ways a client's request goes to frameprepd, modelled on
 * nng's transport interface as the daemon's ports are (service/port.h):
 * each carrier owns its state and offers the route the same operations.
 * There are four:
 *
 *   nng       the request (and an inline frame) through the socket, on a
 *             call slot of its own; the reply through the socket, or in
 *             a region of the client's when it asks (shm_reply)
 *             (client_nng.c)
 *   doorbell  the request header posted in the client's doorbell entry,
 *             the reply header read back there (protocol.h, "Doorbells");
 *             through nng when the daemon does not watch (client_doorbell.c)
 *   stage     an inline frame copied into a stage (a region of the
 *             client's), the tensor and reply written back there and
 *             viewed by the result (client_stage.c)
 *   cuda      an inline frame staged likewise, its tensor into the
 *             caller's CUDA region (client_stage.c)
 *
 * The route (fprep__route_pick, client.c) picks one carrier per request,
 * once; a carrier never calls back up into the route. The connection's
 * set-up (the daemon's limits, the doorbell) is the route's: it runs
 * between a carrier's post and its wait, once per connection. A carrier
 * that sends nothing declines (FPREP__CARRIER_DECLINED), and the request
 * goes through nng, which never declines.
 */
#ifndef FPREP_CARRIER_H
#define FPREP_CARRIER_H

#include <stddef.h>
#include <stdint.h>

#include "frameprep/frameprep.h"

/* What post or wait returns when the carrier sent nothing: the request
 * goes through nng. */
#define FPREP__CARRIER_DECLINED (-1)

/* The low bit of fprep_result.priv marks a result that holds a carrier's
 * object (a stage), whose first member is its carrier (8-aligned like an
 * nng_msg, which is the other). */
#define FPREP__RESULT_HELD ((uintptr_t)1)

struct fprep__stage;

/* fprep__call: one request on its way, from the route to its carrier.
 * The calling thread's own, for the whole call. */
typedef struct fprep__call {
	fprep_request *req;     /* the caller's; request_id written back */
	fprep_request wire;     /* what is sent: req, or req staged */
	const void *payload;    /* the inline frame of wire, or NULL */
	size_t payload_size;    /* its bytes */
	int staged;             /* wire's frame is in one of the stages */
	struct fprep__stage *s; /* the stage the call holds (stage, cuda) */
} fprep__call;

/* fprep__carrier: what a carrier does for the route. Every operation
 * runs on the calling thread of the request. */
typedef struct fprep__carrier {
	const char *name; /* "nng", "doorbell", "stage", "cuda" */
	/* fits tells whether the carrier may take req, a request as its
	 * caller made it (an inline frame's payload given): 1 or 0. */
	int (*fits)(fprep_client *c, const fprep_request *req);
	/* post readies call: the frame where the daemon will read it, and
	 * call->wire as it will be sent. Returns 0, an error, or
	 * FPREP__CARRIER_DECLINED. */
	int (*post)(fprep_client *c, fprep__call *call);
	/* wait sends call->wire (its request id given) and stores the
	 * checked reply in *res as fprep_client_request does. Returns 0,
	 * fprep_client_request's errors, or FPREP__CARRIER_DECLINED (sent
	 * nothing, res zeroed). */
	int (*wait)(fprep_client *c, fprep__call *call, fprep_result *res);
	/* release drops what a result of this carrier holds (priv, with
	 * FPREP__RESULT_HELD); NULL: its results hold an nng message, or
	 * nothing. Any thread. */
	void (*release)(void *priv);
} fprep__carrier;

extern const fprep__carrier fprep__carrier_nng;      /* client_nng.c */
extern const fprep__carrier fprep__carrier_doorbell; /* client_doorbell.c */
extern const fprep__carrier fprep__carrier_stage;    /* client_stage.c */
extern const fprep__carrier fprep__carrier_cuda;     /* client_stage.c */

/* fprep__route_pick chooses the carrier of req (an inline frame's
 * payload given) on c: the first of stage, cuda, doorbell that
 * fits, else nng. Any thread. */
const fprep__carrier *fprep__route_pick(fprep_client *c,
                                        const fprep_request *req);

/* fprep__carrier_region_wait is the wait of a request whose frame and
 * tensor are in regions: through the client's doorbell when it fits and
 * its entry is free, else through nng (client_doorbell.c). */
int fprep__carrier_region_wait(fprep_client *c, fprep__call *call,
                               fprep_result *res);

#endif /* FPREP_CARRIER_H */
