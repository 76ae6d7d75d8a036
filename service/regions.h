/*
 * regions.h: every memory region a client registered with the daemon, from
 * REGISTER to the last unmap: register -> map -> pin -> use -> unpin ->
 * unmap. The loop thread owns the table; what blocks or needs the device
 * (open + mmap, cudaHostRegister and their undoing) runs on the backend's
 * thread through its administrative queue (backend.h, memreg.h), and each
 * operation's end comes back to the loop through the event queue.
 *
 * A region is registered by one connection (nng pipe) and only that
 * connection's requests may name it. It leaves the table on UNREGISTER,
 * when its connection closes, or at shutdown; it is unpinned and unmapped
 * once no request in flight uses it any more.
 */
#ifndef FPREP_SERVICE_REGIONS_H
#define FPREP_SERVICE_REGIONS_H

#include <stdint.h>

#include "backend.h"
#include "evq.h"
#include "memreg.h"

/* fprep__regions_cb: the end of a registration or unregistration, on the
 * loop thread: status FPREP_OK (id: the region's) or an enum fprep_err
 * with a sentence in message (which lives until the callback returns). */
typedef void (*fprep__regions_cb)(void *data, int status, uint32_t id,
                                  const char *message);

typedef struct fprep__regions_entry fprep__regions_entry;
struct fprep__shares;

/* fprep__regions: the table and its limits. Embedded; init/fini. */
typedef struct fprep__regions {
	fprep__regions_entry *head;  /* open and usable */
	fprep__regions_entry *other; /* opening, or out of the table and
	                                not yet closed */
	fprep__backend *backend;     /* runs the operations; NULL: detached */
	fprep__evq *evq;             /* where completions go */
	int ev_kind;                 /* their fprep__event kind */
	int closing;                 /* fprep__regions_close ran */
	uint32_t next_id;            /* the next id to give: never 0; from a
	                                random start (protocol.h, REGISTER) */
	unsigned max_per_pipe;
	uint64_t max_region_bytes;
	uint64_t max_bytes; /* all regions, reserved or mapped */
	uint64_t bytes;     /* reserved or mapped now */
	int allow_cuda;     /* REGISTER_CUDA accepted */
	unsigned max_cuda_per_pipe;
	const struct fprep__shares *shares; /* NULL: none */
} fprep__regions;

/* fprep__regions_init sets up an empty table whose operations backend
 * runs; their completions are pushed onto evq as events of kind ev_kind,
 * which the evq's owner hands to fprep__regions_event. Loop thread. */
void fprep__regions_init(fprep__regions *t, fprep__backend *backend,
                         fprep__evq *evq, int ev_kind, unsigned max_per_pipe,
                         uint64_t max_region_bytes, uint64_t max_bytes);

/* fprep__regions_set_shares has registrations checked against the
 * connection's and the user's shares too (config.h): shares is read at
 * each registration, so a change to it (SIGHUP) applies to the next one;
 * it must outlive the table. Loop thread. */
void fprep__regions_set_shares(fprep__regions *t,
                               const struct fprep__shares *shares);

/* fprep__regions_register registers the shared-memory object name (size
 * bytes) for connection pipe, whose peer is user uid: the name, the size
 * and the limits (max-shm-bytes and its shares) are checked at once and
 * the bytes reserved, then the backend maps (and pins) it. Returns 0, and
 * cb(data, ...) follows on the loop thread with the region's id or the reason
 * it failed (FPREP_ECLOSED when the connection closed meanwhile); or an error
 * with a sentence in msg, and cb is not called. */
int fprep__regions_register(fprep__regions *t, const char *name, uint64_t size,
                            uint32_t pipe, uint64_t uid, fprep__regions_cb cb,
                            void *data, char *msg, size_t msg_size);

/* fprep__regions_set_cuda allows CUDA regions (allow != 0; refused
 * after init), at most max_per_pipe per connection. Loop thread. */
void fprep__regions_set_cuda(fprep__regions *t, int allow,
                             unsigned max_per_pipe);

/* fprep__regions_register_cuda registers the device memory a
 * REGISTER_CUDA request names (req: cuda_handle, cuda_uuid, cuda_offset,
 * region_size) for connection pipe of user uid, like
 * fprep__regions_register: checked here (allowed, size, overflow, the
 * per-connection limit, the user's share), then opened by
 * the backend's lane of that device, which checks the UUID and the
 * allocation. Returns 0 and cb follows, or an error with msg (FPREP_EPERM
 * when CUDA regions are off). */
int fprep__regions_register_cuda(fprep__regions *t,
                                 const fprep_register_request *req,
                                 uint32_t pipe, uint64_t uid,
                                 fprep__regions_cb cb, void *data, char *msg,
                                 size_t msg_size);

/* fprep__regions_unregister takes region id of pipe out of the table: no
 * new request finds it. Once the requests using it are done, the backend
 * unpins and unmaps it; then cb (NULL: nobody to tell) follows on the loop
 * thread with FPREP_OK, so a reply sent from cb tells the client that the
 * daemon no longer touches the memory. Returns 0, or FPREP_EREGION with a
 * sentence in msg (cb is not called). */
int fprep__regions_unregister(fprep__regions *t, uint32_t id, uint32_t pipe,
                              fprep__regions_cb cb, void *data, char *msg,
                              size_t msg_size);

/* fprep__regions_remove_pipe takes every region of pipe out of the table
 * (and drops its registrations in progress: they are closed once open);
 * returns how many regions left the table. */
unsigned fprep__regions_remove_pipe(fprep__regions *t, uint32_t pipe);

/* fprep__regions_find returns pipe's open region id, or NULL (another
 * pipe's region, an unknown id, or a region closing or broken). */
fprep__memreg *fprep__regions_find(fprep__regions *t, uint32_t id,
                                   uint32_t pipe);

/* fprep__regions_use and _unuse count the requests in flight on r (found
 * with fprep__regions_find); the last _unuse of a removed region closes
 * it. */
void fprep__regions_use(fprep__memreg *r);
void fprep__regions_unuse(fprep__regions *t, fprep__memreg *r);

/* fprep__regions_count returns the shared-memory regions in the table and
 * the bytes reserved or mapped. */
unsigned fprep__regions_count(const fprep__regions *t, uint64_t *bytes);

/* fprep__regions_count_cuda returns the CUDA regions in the table and in
 * *alive those not yet closed (in the table, opening or closing): 0 once
 * every handle the daemon opened was closed. */
unsigned fprep__regions_count_cuda(const fprep__regions *t, unsigned *alive);

/* fprep__regions_event finishes an operation whose completion ev (of kind
 * ev_kind) the event queue delivered; it calls the waiting callback, if
 * any. Loop thread. */
void fprep__regions_event(fprep__regions *t, fprep__event *ev);

/* fprep__regions_close begins the end at shutdown: every region in the
 * table is closed (no request may use one any more), registrations still
 * opening fail with FPREP_ESHUTDOWN once open and are closed, and new
 * ones are refused. The closes complete through events as usual. */
void fprep__regions_close(fprep__regions *t);

/* fprep__regions_detach tells the table that its backend is closed (its
 * queued operations ran): operations from now on run here, on the loop
 * thread, and only unmap (the process is ending); their completions
 * still arrive as events. */
void fprep__regions_detach(fprep__regions *t);

/* fprep__regions_fini frees the table once the event queue has closed.
 * Whatever is left (its completion never delivered) is unmapped and freed
 * with a warning; returns how many were left, 0 after a clean close. */
unsigned fprep__regions_fini(fprep__regions *t);

#endif /* FPREP_SERVICE_REGIONS_H */
