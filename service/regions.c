/*
 * regions.c: the daemon's registered memory regions, from REGISTER to the
 * last unmap (see regions.h).
 *
 * The design is simple: each region is an entry on the loop thread that
 * embeds its record (memreg.h) and goes through
 *
 *   OPENING  its OPEN (map, pin) is queued on the backend
 *   OPEN     in the table: requests of its connection find and use it
 *   RETIRED  out of the table, still used by requests in flight
 *   CLOSING  its CLOSE (unpin, unmap) is queued on the backend
 *
 * and is freed when the CLOSE completes. An operation's completion comes
 * back as an event on the loop's queue, where fprep__regions_event moves
 * the entry on and tells whoever waits (the server's slot). Two singly
 * linked lists are enough: the table holds at most max-regions per
 * connection and lookups happen once per request. Once the backend is
 * closed (detached), the operations run here and only unmap.
 */
#include "regions.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "fprep_assert.h"
#include "log.h"
#include "metrics.h"

enum regions_state { ENTRY_OPENING, ENTRY_OPEN, ENTRY_RETIRED, ENTRY_CLOSING };

struct fprep__regions_entry {
	fprep__memreg r;
	fprep__event ev; /* the end of r's operation, for the loop */
	fprep__regions *t;
	int state;            /* enum regions_state */
	int dropped;          /* OPENING: its connection closed meanwhile */
	unsigned users;       /* requests in flight that use it */
	int metered;          /* counted in the metrics: 1 + pinned */
	uint64_t uid;         /* the registering peer's user */
	fprep__regions_cb cb; /* told when the operation it waits for ends */
	void *cb_data;
	fprep__regions_entry *next;
};

/* regions_first_id is a random id to start from, never 0 (protocol.h,
 * REGISTER): a request sent across a restart with an id of the earlier
 * daemon then names none of this one's regions, but by chance. */
static uint32_t regions_first_id(void)
{
	uint32_t id = 0;
	struct timespec ts;

	if (getrandom(&id, sizeof(id), GRND_NONBLOCK) != (ssize_t)sizeof(id)) {
		clock_gettime(CLOCK_REALTIME, &ts);
		id = (uint32_t)ts.tv_nsec ^ (uint32_t)ts.tv_sec ^
		     ((uint32_t)getpid() << 16);
	}
	return id != 0 ? id : 1;
}

void fprep__regions_init(fprep__regions *t, fprep__backend *backend,
                         fprep__evq *evq, int ev_kind, unsigned max_per_pipe,
                         uint64_t max_region_bytes, uint64_t max_bytes)
{
	memset(t, 0, sizeof(*t));
	t->backend = backend;
	t->evq = evq;
	t->ev_kind = ev_kind;
	t->next_id = regions_first_id();
	t->max_per_pipe = max_per_pipe;
	t->max_region_bytes = max_region_bytes;
	t->max_bytes = max_bytes;
}

void fprep__regions_set_cuda(fprep__regions *t, int allow,
                             unsigned max_per_pipe)
{
	t->allow_cuda = allow;
	t->max_cuda_per_pipe = max_per_pipe;
}

void fprep__regions_set_shares(fprep__regions *t,
                               const struct fprep__shares *shares)
{
	t->shares = shares;
}

/* regions_host_bytes: what e counts against max-shm-bytes. */
static uint64_t regions_host_bytes(const fprep__regions_entry *e)
{
	return e->r.kind == FPREP__MEMREG_SHM ? e->r.size : 0;
}

static fprep__regions_entry *regions_entry(fprep__memreg *r)
{
	return fprep__container_of(r, fprep__regions_entry, r);
}

/* regions_unlink takes e out of the list at *head. */
static void regions_unlink(fprep__regions_entry **head, fprep__regions_entry *e)
{
	for (fprep__regions_entry **pp = head; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == e) {
			*pp = e->next;
			e->next = NULL;
			return;
		}
	}
}

/* regions_op_done: the backend ran e's operation; on its thread. */
static void regions_op_done(fprep__memreg *r)
{
	fprep__regions_entry *e = regions_entry(r);

	fprep__evq_push(e->t->evq, &e->ev);
}

/* regions_submit has the backend run verb on e; when it cannot (detached,
 * or refused), the operation runs here: an OPEN fails, a CLOSE unmaps.
 * Either way its completion arrives as an event. */
static void regions_submit(fprep__regions *t, fprep__regions_entry *e, int verb)
{
	fprep__backend *b = t->backend;
	int rv = FPREP_ESHUTDOWN;

	e->r.verb = verb;
	e->r.status = FPREP_OK;
	e->r.message[0] = '\0';
	e->r.done = regions_op_done;
	e->r.data = t;
	e->ev.kind = t->ev_kind;
	if (b != NULL && b->region_op == NULL)
		rv = FPREP_EUNSUPPORTED;
	else if (b != NULL && (rv = b->region_op(b, &e->r)) == 0)
		return;
	if (verb == FPREP__MEMREG_OPEN) {
		e->r.status = rv;
		snprintf(e->r.message, sizeof(e->r.message),
		         "backend %s cannot map regions (%s)",
		         b != NULL ? b->name : "(closed)", fprep_err_name(rv));
	} else {
		fprep__memreg_unmap(&e->r);
	}
	fprep__evq_push(t->evq, &e->ev);
}

/* regions_retire takes e, out of the table, to its close: at once, or
 * when its last request is done. */
static void regions_retire(fprep__regions *t, fprep__regions_entry *e)
{
	e->next = t->other;
	t->other = e;
	if (e->users > 0) {
		e->state = ENTRY_RETIRED;
		return;
	}
	e->state = ENTRY_CLOSING;
	regions_submit(t, e, FPREP__MEMREG_CLOSE);
}

/* regions_pipe_count counts pipe's regions of kind, open or opening. */
static unsigned regions_pipe_count(const fprep__regions *t, uint32_t pipe,
                                   int kind)
{
	const fprep__regions_entry *e;
	unsigned n = 0;

	for (e = t->head; e != NULL; e = e->next)
		n += e->r.owner == pipe && e->r.kind == kind;
	for (e = t->other; e != NULL; e = e->next)
		n += e->state == ENTRY_OPENING && !e->dropped &&
		     e->r.owner == pipe && e->r.kind == kind;
	return n;
}

/* regions_shm_share checks size more bytes of shared memory against
 * pipe's and uid's shares of max-shm-bytes. Every entry not yet freed
 * counts, as in t->bytes. Returns 0 or FPREP_ELIMIT with msg. */
static int regions_shm_share(const fprep__regions *t, uint32_t pipe,
                             uint64_t uid, uint64_t size, char *msg,
                             size_t msg_size)
{
	const fprep__shares *sh = t->shares;
	const fprep__regions_entry *lists[2] = {t->head, t->other};
	uint64_t conn = 0, user = 0;

	if (sh == NULL ||
	    (sh->shm_bytes_per_conn == 0 && sh->shm_bytes_per_uid == 0))
		return 0;
	for (int k = 0; k < 2; k++)
		for (const fprep__regions_entry *e = lists[k]; e != NULL;
		     e = e->next) {
			conn += e->r.owner == pipe ? regions_host_bytes(e) : 0;
			user += e->uid == uid ? regions_host_bytes(e) : 0;
		}
	if (sh->shm_bytes_per_conn > 0 &&
	    (conn >= sh->shm_bytes_per_conn ||
	     size > sh->shm_bytes_per_conn - conn)) {
		snprintf(msg, msg_size,
		         "region_size %" PRIu64 " + %" PRIu64
		         " bytes of this connection's regions exceeds "
		         "max-shm-bytes-per-conn %" PRIu64,
		         size, conn, sh->shm_bytes_per_conn);
		return FPREP_ELIMIT;
	}
	if (sh->shm_bytes_per_uid > 0 &&
	    (user >= sh->shm_bytes_per_uid ||
	     size > sh->shm_bytes_per_uid - user)) {
		snprintf(msg, msg_size,
		         "region_size %" PRIu64 " + %" PRIu64
		         " bytes of uid %" PRIu64 "'s regions (all its "
		         "connections) exceeds max-shm-bytes-per-uid %" PRIu64,
		         size, user, uid, sh->shm_bytes_per_uid);
		return FPREP_ELIMIT;
	}
	return 0;
}

/* regions_uid_cuda counts uid's CUDA regions, open or opening, as
 * regions_pipe_count does a connection's. */
static unsigned regions_uid_cuda(const fprep__regions *t, uint64_t uid)
{
	const fprep__regions_entry *e;
	unsigned n = 0;

	for (e = t->head; e != NULL; e = e->next)
		n += e->uid == uid && e->r.kind == FPREP__MEMREG_CUDA;
	for (e = t->other; e != NULL; e = e->next)
		n += e->state == ENTRY_OPENING && !e->dropped &&
		     e->uid == uid && e->r.kind == FPREP__MEMREG_CUDA;
	return n;
}

/* regions_new allocates an OPENING entry of kind for pipe. */
static fprep__regions_entry *regions_new(fprep__regions *t, int kind,
                                         uint32_t pipe, uint64_t uid,
                                         uint64_t size, char *msg,
                                         size_t msg_size)
{
	fprep__regions_entry *e = calloc(1, sizeof(*e));

	if (e == NULL) {
		snprintf(msg, msg_size, "REGISTER: out of memory");
		return NULL;
	}
	e->t = t;
	e->r.kind = kind;
	e->r.owner = pipe;
	e->r.size = size;
	e->uid = uid;
	e->state = ENTRY_OPENING;
	return e;
}

/* regions_start queues e's OPEN; cb follows. */
static void regions_start(fprep__regions *t, fprep__regions_entry *e,
                          fprep__regions_cb cb, void *data)
{
	e->cb = cb;
	e->cb_data = data;
	e->next = t->other;
	t->other = e;
	t->bytes += regions_host_bytes(e);
	regions_submit(t, e, FPREP__MEMREG_OPEN);
}

int fprep__regions_register(fprep__regions *t, const char *name, uint64_t size,
                            uint32_t pipe, uint64_t uid, fprep__regions_cb cb,
                            void *data, char *msg, size_t msg_size)
{
	fprep__regions_entry *e;
	unsigned n;
	int rv;

	if (t->closing) {
		snprintf(msg, msg_size, "server shutting down");
		return FPREP_ESHUTDOWN;
	}
	rv = fprep__shm_region_name_check(name, strlen(name), msg, msg_size);
	if (rv != 0)
		return rv;
	if (size == 0 || size > t->max_region_bytes) {
		snprintf(msg, msg_size,
		         "region_size %" PRIu64
		         " outside 1..max-region-bytes %" PRIu64,
		         size, t->max_region_bytes);
		return FPREP_ELIMIT;
	}
	n = regions_pipe_count(t, pipe, FPREP__MEMREG_SHM);
	if (n >= t->max_per_pipe) {
		snprintf(msg, msg_size,
		         "this connection has %u regions, the limit "
		         "max-regions",
		         n);
		return FPREP_ELIMIT;
	}
	if (size > t->max_bytes - t->bytes) {
		snprintf(msg, msg_size,
		         "region_size %" PRIu64 " + %" PRIu64
		         " bytes already mapped exceeds max-shm-bytes %" PRIu64,
		         size, t->bytes, t->max_bytes);
		return FPREP_ELIMIT;
	}
	rv = regions_shm_share(t, pipe, uid, size, msg, msg_size);
	if (rv != 0)
		return rv;
	e = regions_new(t, FPREP__MEMREG_SHM, pipe, uid, size, msg, msg_size);
	if (e == NULL)
		return FPREP_ENOMEM;
	snprintf(e->r.u.shm.name, sizeof(e->r.u.shm.name), "%s", name);
	e->r.u.shm.peer_uid = uid;
	e->r.u.shm.max_size = t->max_region_bytes;
	regions_start(t, e, cb, data);
	return 0;
}

int fprep__regions_register_cuda(fprep__regions *t,
                                 const fprep_register_request *req,
                                 uint32_t pipe, uint64_t uid,
                                 fprep__regions_cb cb, void *data, char *msg,
                                 size_t msg_size)
{
	fprep__regions_entry *e;
	uint64_t end;
	unsigned n;

	if (t->closing) {
		snprintf(msg, msg_size, "server shutting down");
		return FPREP_ESHUTDOWN;
	}
	if (!t->allow_cuda) {
		snprintf(msg, msg_size,
		         "REGISTER_CUDA: CUDA regions are turned off on this "
		         "daemon (--allow-cuda-regions=false)");
		return FPREP_EPERM;
	}
	if (req->region_size == 0 ||
	    __builtin_add_overflow(req->cuda_offset, req->region_size, &end)) {
		snprintf(msg, msg_size,
		         "region_size %" PRIu64 " at cuda_offset %" PRIu64
		         ": empty or past 2^64",
		         req->region_size, req->cuda_offset);
		return FPREP_EINVAL;
	}
	n = regions_pipe_count(t, pipe, FPREP__MEMREG_CUDA);
	if (n >= t->max_cuda_per_pipe) {
		snprintf(msg, msg_size,
		         "this connection has %u CUDA regions: the limit "
		         "is max-cuda-regions %u",
		         n, t->max_cuda_per_pipe);
		return FPREP_ELIMIT;
	}
	if (t->shares != NULL && t->shares->cuda_per_uid > 0 &&
	    (n = regions_uid_cuda(t, uid)) >= t->shares->cuda_per_uid) {
		snprintf(msg, msg_size,
		         "uid %" PRIu64 " has %u CUDA regions (all its "
		         "connections): the limit is max-cuda-regions-per-uid "
		         "%u",
		         uid, n, t->shares->cuda_per_uid);
		return FPREP_ELIMIT;
	}
	e = regions_new(t, FPREP__MEMREG_CUDA, pipe, uid, req->region_size, msg,
	                msg_size);
	if (e == NULL)
		return FPREP_ENOMEM;
	memcpy(e->r.u.cuda.handle, req->cuda_handle,
	       sizeof(e->r.u.cuda.handle));
	memcpy(e->r.u.cuda.uuid, req->cuda_uuid, sizeof(e->r.u.cuda.uuid));
	e->r.u.cuda.offset = req->cuda_offset;
	regions_start(t, e, cb, data);
	return 0;
}

/* regions_id_used tells whether a region not yet closed has id. */
static int regions_id_used(const fprep__regions *t, uint32_t id)
{
	for (const fprep__regions_entry *e = t->head; e != NULL; e = e->next)
		if (e->r.id == id)
			return 1;
	for (const fprep__regions_entry *e = t->other; e != NULL; e = e->next)
		if (e->r.id == id)
			return 1;
	return 0;
}

/* regions_opened enters e, just mapped and pinned, in the table, or closes
 * it when nobody wants it any more. */
static void regions_opened(fprep__regions *t, fprep__regions_entry *e)
{
	fprep__regions_cb cb = e->cb;
	void *data = e->cb_data;
	const char *why = NULL;
	char msg[FPREP_MESSAGE_SIZE], what[FPREP_REGION_NAME_MAX + 1];
	int status = FPREP_OK;

	e->cb = NULL;
	regions_unlink(&t->other, e);
	if (e->dropped || t->closing) {
		status = e->dropped ? FPREP_ECLOSED : FPREP_ESHUTDOWN;
		why = e->dropped ? "connection closed during registration"
		                 : "server shutting down";
		e->state = ENTRY_CLOSING;
		e->next = t->other;
		t->other = e;
		regions_submit(t, e, FPREP__MEMREG_CLOSE);
		if (cb != NULL)
			cb(data, status, 0, why);
		return;
	}
	/* After the counter wraps, skip the ids of regions still alive. */
	do {
		e->r.id = t->next_id++;
		if (t->next_id == 0)
			t->next_id = 1;
	} while (regions_id_used(t, e->r.id));
	e->state = ENTRY_OPEN;
	e->next = t->head;
	t->head = e;
	fprep__memreg_describe(&e->r, what, sizeof(what));
	e->metered = 1 + (e->r.pinned != 0);
	fprep__metrics_region(1, e->r.size, e->metered == 2);
	fprep__log(FPREP_LOG_INFO,
	           "region %" PRIu32 " (%s, %" PRIu64
	           " bytes%s) registered by connection %" PRIu32,
	           e->r.id, what, e->r.size, e->r.pinned ? ", pinned" : "",
	           e->r.owner);
	snprintf(msg, sizeof(msg), "region %" PRIu32 " registered", e->r.id);
	if (cb != NULL)
		cb(data, FPREP_OK, e->r.id, msg);
}

/* regions_closed frees e, closed, and tells whoever waits. */
static void regions_closed(fprep__regions *t, fprep__regions_entry *e)
{
	fprep__regions_cb cb = e->cb;
	void *data = e->cb_data;
	uint32_t id = e->r.id;
	char msg[FPREP_MESSAGE_SIZE], what[FPREP_REGION_NAME_MAX + 1];

	regions_unlink(&t->other, e);
	t->bytes -= regions_host_bytes(e);
	fprep__memreg_describe(&e->r, what, sizeof(what));
	if (e->metered)
		fprep__metrics_region(-1, e->r.size, e->metered == 2);
	if (id != 0)
		fprep__log(FPREP_LOG_INFO,
		           "region %" PRIu32 " (%s, %" PRIu64
		           " bytes) released",
		           id, what, e->r.size);
	free(e);
	snprintf(msg, sizeof(msg), "region %" PRIu32 " unregistered", id);
	if (cb != NULL)
		cb(data, FPREP_OK, id, msg);
}

void fprep__regions_event(fprep__regions *t, fprep__event *ev)
{
	fprep__regions_entry *e =
	        fprep__container_of(ev, fprep__regions_entry, ev);
	fprep__regions_cb cb = e->cb;
	char msg[FPREP_MESSAGE_SIZE];
	int status = e->r.status;

	if (e->r.verb == FPREP__MEMREG_CLOSE) {
		regions_closed(t, e);
		return;
	}
	if (status == FPREP_OK) {
		regions_opened(t, e);
		return;
	}
	/* The OPEN failed: nothing is mapped. */
	snprintf(msg, sizeof(msg), "%s",
	         e->r.message[0] != '\0' ? e->r.message
	                                 : fprep_strerror(status));
	regions_unlink(&t->other, e);
	t->bytes -= regions_host_bytes(e);
	if (cb != NULL)
		cb(e->cb_data, status, 0, msg);
	free(e);
}

int fprep__regions_unregister(fprep__regions *t, uint32_t id, uint32_t pipe,
                              fprep__regions_cb cb, void *data, char *msg,
                              size_t msg_size)
{
	for (fprep__regions_entry **pp = &t->head; *pp != NULL;
	     pp = &(*pp)->next) {
		fprep__regions_entry *e = *pp;

		if (e->r.id != id || e->r.owner != pipe)
			continue;
		*pp = e->next;
		e->cb = cb;
		e->cb_data = data;
		regions_retire(t, e);
		return 0;
	}
	snprintf(msg, msg_size,
	         "region_id %" PRIu32 " is not a region of this connection",
	         id);
	return FPREP_EREGION;
}

unsigned fprep__regions_remove_pipe(fprep__regions *t, uint32_t pipe)
{
	unsigned n = 0;

	for (fprep__regions_entry *e = t->other; e != NULL; e = e->next)
		if (e->state == ENTRY_OPENING && e->r.owner == pipe)
			e->dropped = 1;
	for (fprep__regions_entry **pp = &t->head; *pp != NULL;) {
		fprep__regions_entry *e = *pp;

		if (e->r.owner != pipe) {
			pp = &e->next;
			continue;
		}
		*pp = e->next;
		regions_retire(t, e);
		n++;
	}
	return n;
}

fprep__memreg *fprep__regions_find(fprep__regions *t, uint32_t id,
                                   uint32_t pipe)
{
	for (fprep__regions_entry *e = t->head; e != NULL; e = e->next)
		if (e->r.id == id)
			return e->r.owner == pipe &&
			                       !fprep__memreg_broken(&e->r)
			               ? &e->r
			               : NULL;
	return NULL;
}

void fprep__regions_use(fprep__memreg *r)
{
	fprep__regions_entry *e = regions_entry(r);

	/* Only a region in the table (found by a request, or held by a
	 * doorbell) gains a use; one retired still has the uses that keep
	 * it. */
	FPREP__ASSERT(e->state == ENTRY_OPEN ||
	              (e->state == ENTRY_RETIRED && e->users > 0));
	e->users++;
}

void fprep__regions_unuse(fprep__regions *t, fprep__memreg *r)
{
	fprep__regions_entry *e = regions_entry(r);

	FPREP__ASSERT(e->users > 0 &&
	              (e->state == ENTRY_OPEN || e->state == ENTRY_RETIRED));
	if (--e->users > 0 || e->state != ENTRY_RETIRED)
		return;
	e->state = ENTRY_CLOSING;
	regions_submit(t, e, FPREP__MEMREG_CLOSE);
}

unsigned fprep__regions_count(const fprep__regions *t, uint64_t *bytes)
{
	unsigned n = 0;

	for (const fprep__regions_entry *e = t->head; e != NULL; e = e->next)
		n += e->r.kind == FPREP__MEMREG_SHM;
	*bytes = t->bytes;
	return n;
}

unsigned fprep__regions_count_cuda(const fprep__regions *t, unsigned *alive)
{
	unsigned n = 0, a = 0;

	for (const fprep__regions_entry *e = t->head; e != NULL; e = e->next)
		n += e->r.kind == FPREP__MEMREG_CUDA;
	for (const fprep__regions_entry *e = t->other; e != NULL; e = e->next)
		a += e->r.kind == FPREP__MEMREG_CUDA;
	*alive = n + a;
	return n;
}

void fprep__regions_close(fprep__regions *t)
{
	fprep__regions_entry *e;

	t->closing = 1;
	while ((e = t->head) != NULL) {
		t->head = e->next;
		regions_retire(t, e);
	}
}

void fprep__regions_detach(fprep__regions *t)
{
	t->backend = NULL;
}

unsigned fprep__regions_fini(fprep__regions *t)
{
	unsigned n = 0;
	fprep__regions_entry *e;

	while ((e = t->head) != NULL || (e = t->other) != NULL) {
		if (e == t->head)
			t->head = e->next;
		else
			t->other = e->next;
		fprep__memreg_unmap(&e->r);
		t->bytes -= regions_host_bytes(e);
		if (e->metered)
			fprep__metrics_region(-1, e->r.size, e->metered == 2);
		free(e);
		n++;
	}
	if (n > 0)
		fprep__log(FPREP_LOG_WARNING,
		           "%u regions were still open at the end: unmapped",
		           n);
	return n;
}
