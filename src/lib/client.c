/*
 * client.c: the blocking client of frameprepd: its public calls, the
 * route each request takes, and the connection's set-up.
 *
 * The design is simple: a request's carrier (carrier.h: nng, doorbell,
 * stage, cuda) is picked once, by fprep__route_pick, the first in a fixed
 * order that fits the request as the caller made it; the carrier posts it
 * (a stage takes the frame), the connection is set up as far as the
 * posted request needs, and the carrier waits for the reply. The carriers
 * sit below this file and never call into it (client_conn.h shows the
 * layers). The connection's set-up is done here alone, once per
 * connection, and again after the daemon restarted (a new connection):
 * the daemon's limits, asked with INFO by the first call that checks an
 * inline frame against them (fprep_limits_parse reads them), and the
 * client's doorbell, a region of one entry that the first staged call
 * registers (REGISTER and DOORBELL) after its stage, so the daemon's
 * limits on regions favour the stage; a daemon that refuses leaves the
 * calls on nng until its next connection. The stages themselves are the
 * stage carrier's. The calls an outer call makes on the way (INFO,
 * REGISTER) share its deadline. ROIS and BATCH requests and the
 * asynchronous API go through nng only.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>

#include "carrier.h"
#include "client_conn.h"
#include "client_internal.h"
#include "fprep_assert.h"
#include "frameprep/frameprep.h"
#include "ops.h"

/* The doorbell's region: its area with one entry fits in a page. */
#define CLIENT_DOORBELL_BYTES 4096

/* Whether the daemon's limits were asked for on the present connection
 * (limits_gen): not yet, known, or asked without an answer (not asked
 * again on it). */
enum { CLIENT_LIMITS_UNASKED, CLIENT_LIMITS_KNOWN, CLIENT_LIMITS_UNKNOWN };

static void client_doorbell_drop(fprep_client *c);

/* client_make_room closes the client's stages that no result or call
 * holds, and the doorbell it set up of itself, so the daemon's limits on
 * regions leave room for the caller's own; returns how many. */
static unsigned client_make_room(fprep_client *c)
{
	unsigned shed = fprep__stages_shed(&c->stages);

	/* A doorbell the client set up of itself goes too, until the next
	 * connection (not while it is being set up). */
	if (atomic_load(&c->db_mode) == FPREP__DB_AUTO &&
	    pthread_mutex_trylock(&c->db_mtx) == 0) {
		if (atomic_load(&c->db_mode) == FPREP__DB_AUTO &&
		    c->db_region != NULL) {
			client_doorbell_drop(c);
			shed++;
		}
		pthread_mutex_unlock(&c->db_mtx);
	}
	return shed;
}

int fprep_client_open(fprep_client **clientp, const char *url, int timeout_ms)
{
	return fprep_client_open_trusting(clientp, url, timeout_ms, NULL);
}

int fprep_client_open_trusting(fprep_client **clientp, const char *url,
                               int timeout_ms, const char *trust_owner)
{
	int err = fprep__client_open(clientp, url, timeout_ms, trust_owner);

	if (err != 0)
		return err;
	fprep__stages_init(&(*clientp)->stages);
	(*clientp)->make_room = client_make_room;
	return FPREP_OK;
}

void fprep_client_set_staging(fprep_client *client, int on)
{
	atomic_store(&client->stage_off, !on);
	if (!on)
		fprep__stages_fini(&client->stages);
}

void fprep_client_close(fprep_client *client)
{
	if (client == NULL || fprep__client_forked(client))
		return;
	fprep__stages_fini(&client->stages);
	(void)fprep_client_doorbell(client, 0);
	fprep__client_slots_fini(client);
	fprep__stages_destroy(&client->stages);
	fprep__client_unref(client);
}

/* client_doorbell_drop ends the client's doorbell, if any, once no call
 * uses it: the region's close sends the UNREGISTER that ends it on its
 * connection, and after that connection's loss (the daemon restarted)
 * only unmaps it, as its id may be another region's now. Under db_mtx. */
static void client_doorbell_drop(fprep_client *c)
{
	fprep_region *r = c->db_region;

	FPREP__ASSERT(pthread_mutex_trylock(&c->db_mtx) == EBUSY);
	if (r == NULL)
		return;
	fprep__client_doorbell_hold(c);
	atomic_store(&c->db_area, NULL);
	c->db_region = NULL;
	atomic_flag_clear(&c->db_busy);
	fprep_region_close(r);
}

/* client_conn_changed tells whether c's connection is no longer the one
 * counted gen made and lost lost. */
static int client_conn_changed(fprep_client *c, uint64_t gen, uint64_t lost)
{
	return atomic_load(&c->conn_gen) != gen ||
	       atomic_load(&c->conn_lost) != lost;
}

/* client_doorbell_setup sets up the doorbell on the client's present
 * connection, dropping first one of an earlier connection (gone with
 * its daemon); one of this connection, in use or given up after a
 * timeout, is kept. shed: the client's free stages may make room for it
 * (fprep_region_open). Returns 0, or the error of the set-up with its
 * reason for fprep_client_last_error; not tried again on this
 * connection unless fprep_client_doorbell asks. Under db_mtx. */
static int client_doorbell_setup(fprep_client *c, int shed)
{
	uint64_t gen = atomic_load(&c->conn_gen);
	uint64_t lost = atomic_load(&c->conn_lost);
	char why[FPREP__CLIENT_ERROR_MAX];
	fprep_region *r;
	int err;

	FPREP__ASSERT(pthread_mutex_trylock(&c->db_mtx) == EBUSY);
	atomic_store(&c->db_tried, gen + 1);
	if (c->db_region != NULL && atomic_load(&c->db_gen) == gen)
		return FPREP_OK;
	client_doorbell_drop(c);
	err = shed ? fprep_region_open(&r, c, CLIENT_DOORBELL_BYTES)
	           : fprep__region_open(&r, c, CLIENT_DOORBELL_BYTES);
	if (err != 0)
		return err;
	/* Not on another connection's region of the same id. */
	err = client_conn_changed(c, gen, lost)
	              ? FPREP_ETRANSPORT
	              : fprep_region_doorbell(r, 0, 1);
	if (client_conn_changed(c, gen, lost)) {
		/* The daemon went meanwhile: set up on the next one. */
		fprep_region_close(r);
		atomic_store(&c->db_tried, 0);
		return fprep__client_error(
		        c, FPREP_ETRANSPORT,
		        "the connection to the daemon changed "
		        "while the doorbell was set up");
	}
	if (err != 0) {
		/* The region's UNREGISTER would clear the reason. */
		snprintf(why, sizeof(why), "%s", fprep_client_last_error(c));
		fprep_region_close(r);
		return fprep__client_error(c, err, "%s", why);
	}
	fprep__client_doorbell_hold(c);
	c->db_region = r;
	atomic_store(&c->db_gen, gen);
	atomic_store(&c->db_lost, lost);
	atomic_store(&c->db_area, fprep_region_base(r));
	atomic_flag_clear(&c->db_busy);
	return FPREP_OK;
}

/* client_doorbell_ensure sets up the doorbell, once per connection, for
 * a call that may use it: in FPREP__DB_ON mode, and in FPREP__DB_AUTO
 * for a staged call (staged). A refusal leaves the calls on nng,
 * silently. */
static void client_doorbell_ensure(fprep_client *c, int staged)
{
	int mode = atomic_load_explicit(&c->db_mode, memory_order_relaxed);

	if (mode == FPREP__DB_OFF || (mode == FPREP__DB_AUTO && !staged) ||
	    atomic_load(&c->db_tried) == atomic_load(&c->conn_gen) + 1 ||
	    c->daemons != 1)
		return;
	pthread_mutex_lock(&c->db_mtx);
	mode = atomic_load(&c->db_mode);
	if ((mode == FPREP__DB_ON || (mode == FPREP__DB_AUTO && staged)) &&
	    atomic_load(&c->db_tried) != atomic_load(&c->conn_gen) + 1)
		(void)client_doorbell_setup(c, 0);
	pthread_mutex_unlock(&c->db_mtx);
	fprep__client_error_clear(c);
}

/* client_setup does the connection's set-up that call, posted, may need:
 * the doorbell, when call may go through one. */
static void client_setup(fprep_client *c, const fprep__call *call)
{
	if (fprep_doorbell_check(&call->wire, NULL, 0) == FPREP_OK)
		client_doorbell_ensure(c, call->staged);
	fprep__client_error_clear(c);
}

/* The route: each request's carrier, picked once, in this order (the
 * first that fits); nng fits every request. */
static const fprep__carrier *const client_carriers[] = {
        &fprep__carrier_stage,
        &fprep__carrier_cuda,
        &fprep__carrier_doorbell,
        &fprep__carrier_nng,
};

const fprep__carrier *fprep__route_pick(fprep_client *c,
                                        const fprep_request *req)
{
	const fprep__carrier *k = &fprep__carrier_nng;

	for (size_t i = 0;
	     i < sizeof(client_carriers) / sizeof(*client_carriers); i++)
		if (client_carriers[i]->fits(c, req)) {
			k = client_carriers[i];
			break;
		}
	return k;
}

/* client_route sends req (payload_size bytes of inline frame at payload)
 * through the carrier fprep__route_pick gives, and stores the checked
 * reply in *res: the carrier's post, the connection's set-up that the
 * posted request may need (the doorbell), the carrier's wait. A carrier
 * that sends nothing leaves the request to nng. */
static int client_route(fprep_client *c, fprep_request *req,
                        const void *payload, size_t payload_size,
                        fprep_result *res)
{
	const fprep__carrier *k = fprep__route_pick(c, req);
	fprep__call call;
	int err;

	memset(res, 0, sizeof(*res));
	if (fprep__client_forked(c))
		return fprep__client_forked_error(c);
	memset(&call, 0, sizeof(call));
	call.req = req;
	call.wire = *req;
	call.payload = payload;
	call.payload_size = payload_size;
	if ((err = k->post(c, &call)) == FPREP__CARRIER_DECLINED) {
		k = &fprep__carrier_nng;
		err = k->post(c, &call);
	}
	if (err != 0)
		return err;
	client_setup(c, &call);
	fprep__client_request_id(c, &call.wire);
	err = k->wait(c, &call, res);
	if (err == FPREP__CARRIER_DECLINED) {
		/* Sent nothing (a stage of a connection gone): inline. */
		call.wire = *req;
		call.payload = payload;
		call.payload_size = payload_size;
		call.staged = 0;
		fprep__client_request_id(c, &call.wire);
		err = fprep__carrier_nng.wait(c, &call, res);
	}
	req->version = call.wire.version;
	req->request_id = call.wire.request_id;
	return err;
}

int fprep_client_limits(fprep_client *client, fprep_limits *lim)
{
	fprep_result res;
	uint64_t gen;
	int err;

	if (fprep__client_forked(client))
		return fprep__client_forked_error(client);
	/* Asked once per connection, by the first caller; the others wait
	 * for it. */
	if (atomic_load(&client->limits_state) == CLIENT_LIMITS_UNASKED ||
	    atomic_load(&client->limits_gen) !=
	            fprep__client_conn_gen(client)) {
		pthread_mutex_lock(&client->limits_mtx);
		err = 0;
		if (atomic_load(&client->limits_state) ==
		            CLIENT_LIMITS_UNASKED ||
		    atomic_load(&client->limits_gen) !=
		            fprep__client_conn_gen(client)) {
			err = fprep_client_info(client, &res);
			/* The connection the reply came on. */
			gen = fprep__client_conn_gen(client);
			if (err == 0 && res.header.status != FPREP_OK)
				err = (int)res.header.status;
			else if (err == 0 &&
			         fprep_limits_parse(res.payload,
			                            &client->limits) != 0)
				err = fprep__client_error(
				        client, FPREP_EPROTO,
				        "the daemon's INFO reply lacks its "
				        "limits");
			atomic_store(&client->limits_gen, gen);
			atomic_store(&client->limits_state,
			             err == 0 ? CLIENT_LIMITS_KNOWN
			                      : CLIENT_LIMITS_UNKNOWN);
			fprep_result_fini(&res);
		}
		pthread_mutex_unlock(&client->limits_mtx);
		if (err)
			return err;
	}
	if (atomic_load(&client->limits_state) != CLIENT_LIMITS_KNOWN)
		return fprep__client_error(
		        client, FPREP_EPROTO,
		        "the daemon did not tell its limits");
	*lim = client->limits;
	return FPREP_OK;
}

int fprep_client_check_request(fprep_client *client, const fprep_request *req)
{
	fprep_limits lim;

	if ((req->kind != FPREP_KIND_FRAME && req->kind != FPREP_KIND_ECHO) ||
	    req->input_loc != FPREP_LOC_INLINE)
		return FPREP_OK;
	/* A daemon that cannot tell its limits still gets the request. */
	if (fprep_client_limits(client, &lim) != FPREP_OK) {
		fprep__client_error_clear(client);
		return FPREP_OK;
	}
	if (req->input_size > lim.max_frame_bytes)
		return fprep__client_error(
		        client, FPREP_ELIMIT,
		        "frame is %" PRIu64 " bytes; the daemon's "
		        "max_frame_bytes is %" PRIu64 " (--max-frame-bytes)",
		        req->input_size, lim.max_frame_bytes);
	return FPREP_OK;
}

/* client_payload_size returns in *sizep the inline payload bytes req
 * carries, checking that payload is there when needed. */
static int client_payload_size(fprep_client *c, const fprep_request *req,
                               const void *payload, size_t *sizep)
{
	*sizep = 0;
	if ((req->kind == FPREP_KIND_FRAME || req->kind == FPREP_KIND_ECHO) &&
	    req->input_loc == FPREP_LOC_INLINE) {
		if (req->input_size > SIZE_MAX - FPREP_REQUEST_HEADER_SIZE)
			return fprep__client_error(
			        c, FPREP_ELIMIT, "input_size %llu too large",
			        (unsigned long long)req->input_size);
		*sizep = (size_t)req->input_size;
		if (*sizep > 0 && payload == NULL)
			return fprep__client_error(
			        c, FPREP_EINVAL,
			        "inline input of %zu bytes without "
			        "a payload",
			        *sizep);
		if (*sizep > 0)
			return fprep_client_check_request(c, req);
	}
	return FPREP_OK;
}

/* client_request is fprep_client_request within the calling thread's
 * deadline. */
static int client_request(fprep_client *client, fprep_request *req,
                          const void *payload, fprep_result *res)
{
	size_t size;
	int err;

	memset(res, 0, sizeof(*res));
	if ((err = client_payload_size(client, req, payload, &size)))
		return err;
	return client_route(client, req, payload, size, res);
}

int fprep_client_request(fprep_client *client, fprep_request *req,
                         const void *payload, fprep_result *res)
{
	/* The limits' INFO, a stage's REGISTER, the doorbell's set-up and
	 * the request itself are one call: they share its deadline. */
	int outer = fprep__client_outer_begin(client);
	int err = client_request(client, req, payload, res);

	fprep__client_outer_end(outer);
	return err;
}

/* client_elements_check checks a ROIS or BATCH request before it is
 * built: its kind, n, the elements (as the daemon will), the payload, and
 * against the daemon's limits when it tells them; sets req->elements and
 * req->input_span and the inline payload's size in *sizep. */
static int client_elements_check(fprep_client *c, fprep_request *req,
                                 const fprep_element *elements, uint32_t n,
                                 const void *payload, size_t *sizep)
{
	char why[FPREP_MESSAGE_SIZE];
	fprep_limits lim;
	uint64_t span = 0, table;

	if (req->kind != FPREP_KIND_ROIS && req->kind != FPREP_KIND_BATCH)
		return fprep__client_error(
		        c, FPREP_EINVAL,
		        "kind %u: ROIS (8) or BATCH (9) expected", req->kind);
	if (n == 0 || n > FPREP_ELEMENTS_MAX || elements == NULL)
		return fprep__client_error(c, FPREP_EINVAL,
		                           "%u elements: 1..%d expected", n,
		                           FPREP_ELEMENTS_MAX);
	if (req->shm_reply)
		return fprep__client_error(
		        c, FPREP_EINVAL,
		        "shm_reply: ROIS and BATCH replies come "
		        "through nng");
	req->elements = n;
	if (req->kind == FPREP_KIND_ROIS)
		span = req->input_size;
	for (uint32_t k = 0; k < n; k++)
		if (fprep__element_check(req, k, &elements[k], &span, why,
		                         sizeof(why)) != FPREP_OK)
			return fprep__client_error(c, FPREP_EINVAL, "%s", why);
	req->input_span = span;
	table = FPREP_TABLE_HEADER_SIZE + (uint64_t)n * FPREP_ELEMENT_SIZE;
	*sizep = 0;
	if (req->input_loc != FPREP_LOC_INLINE)
		return FPREP_OK;
	if (span > SIZE_MAX / 2)
		return fprep__client_error(c, FPREP_ELIMIT,
		                           "%llu bytes of frames",
		                           (unsigned long long)span);
	*sizep = (size_t)span;
	if (payload == NULL)
		return fprep__client_error(
		        c, FPREP_EINVAL,
		        "inline input of %zu bytes without a "
		        "payload",
		        *sizep);
	if (fprep_client_limits(c, &lim) != FPREP_OK) {
		fprep__client_error_clear(
		        c); /* an old daemon refuses the kind */
		return FPREP_OK;
	}
	if (n > lim.max_elements)
		return fprep__client_error(
		        c, FPREP_ELIMIT,
		        "%u elements; the daemon's max_elements is "
		        "%u (--max-elements)",
		        n, lim.max_elements);
	if (span + table > lim.max_frame_bytes)
		return fprep__client_error(
		        c, FPREP_ELIMIT,
		        "%llu bytes of frames and table; the "
		        "daemon's max_frame_bytes is %llu: use a "
		        "region",
		        (unsigned long long)(span + table),
		        (unsigned long long)lim.max_frame_bytes);
	return FPREP_OK;
}

/* client_elements is fprep_client_elements within the calling thread's
 * deadline. */
static int client_elements(fprep_client *c, fprep_request *req,
                           const fprep_element *elements, uint32_t n,
                           const void *payload, fprep_result *res)
{
	nng_time deadline = fprep__client_deadline(c);
	nng_msg *msg = NULL;
	size_t size = 0, at;
	uint8_t *body;
	int err;

	memset(res, 0, sizeof(*res));
	fprep__client_error_clear(c);
	if ((err = client_elements_check(c, req, elements, n, payload, &size)))
		return err;
	at = fprep_request_payload_offset(req);
	fprep__client_request_id(c, req);
	if (nng_msg_alloc(&msg, at + size) != 0)
		return fprep__client_error(c, FPREP_ENOMEM,
		                           "no memory for a %zu-byte request",
		                           at + size);
	body = nng_msg_body(msg);
	fprep_request_encode(req, body);
	fprep_elements_encode(elements, n, body + FPREP_REQUEST_HEADER_SIZE);
	if (size > 0)
		memcpy(body + at, payload, size);
	return fprep__client_exchange(c, msg, NULL, req->request_id, req->kind,
	                              deadline, res);
}

int fprep_client_elements(fprep_client *client, fprep_request *req,
                          const fprep_element *elements, uint32_t n,
                          const void *payload, fprep_result *res)
{
	/* The limits' INFO and the request share the call's deadline. */
	int outer = fprep__client_outer_begin(client);
	int err = client_elements(client, req, elements, n, payload, res);

	fprep__client_outer_end(outer);
	return err;
}

int fprep_result_element_xf(const fprep_result *res, uint32_t k,
                            fprep_element_xf *xf)
{
	const fprep_reply_header *h = &res->header;
	uint64_t at = h->output_loc == FPREP_LOC_INLINE ? h->tensor_size : 0;

	if ((h->kind != FPREP_KIND_ROIS && h->kind != FPREP_KIND_BATCH) ||
	    h->status != FPREP_OK || k >= h->shape[0] ||
	    at + ((uint64_t)k + 1) * FPREP_ELEMENT_XF_SIZE > res->payload_size)
		return FPREP_EINVAL;
	fprep_element_xf_decode((const uint8_t *)res->payload + at +
	                                (size_t)k * FPREP_ELEMENT_XF_SIZE,
	                        xf);
	return FPREP_OK;
}

int fprep_client_doorbell(fprep_client *client, int on)
{
	int err = FPREP_OK;

	if (fprep__client_forked(client))
		return fprep__client_forked_error(client);
	pthread_mutex_lock(&client->db_mtx);
	atomic_store(&client->db_mode, on ? FPREP__DB_ON : FPREP__DB_OFF);
	if (on)
		err = client_doorbell_setup(client, 1);
	else
		client_doorbell_drop(client);
	pthread_mutex_unlock(&client->db_mtx);
	return err;
}

int fprep_client_submit(fprep_client *client, fprep_request *req,
                        const void *payload, fprep_done_fn cb, void *arg,
                        fprep_pending **pp)
{
	size_t size;
	int err;

	*pp = NULL;
	if ((err = client_payload_size(client, req, payload, &size)))
		return err;
	return fprep__client_submit(client, req, payload, size, cb, arg, pp);
}
