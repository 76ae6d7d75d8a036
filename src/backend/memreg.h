/*
 * memreg.h: a memory region that a client registered with the daemon, of
 * either kind: a POSIX shared-memory object (FPREP__MEMREG_SHM), mapped
 * into the daemon (shm_region.h) and, on the GPU, pinned with
 * cudaHostRegister; or a client's device memory shared through a CUDA IPC
 * handle (FPREP__MEMREG_CUDA), which only the GPU lane of its device opens
 * (cudaIpcOpenMemHandle) and closes. Each kind has its spec and state in
 * the union and its own case in each backend's open and close.
 *
 * The design is simple: the loop thread (service/regions.c) creates the
 * record from a REGISTER and owns it; the work that blocks or needs the
 * device runs on a backend thread, one administrative operation at a time,
 * through the backend's region_op (backend.h):
 *
 *   OPEN   map it (open + mmap), then on the GPU lane pin it
 *   CLOSE  no job uses it any more: unpin, then unmap
 *
 * The backend sets status and message and calls done from its thread;
 * done hands the record back to the loop, which frees it after CLOSE. The
 * loop's own bookkeeping (users, state, lists) lives in the entry that
 * embeds the record (service/regions.c).
 */
#ifndef FPREP_MEMREG_H
#define FPREP_MEMREG_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "frameprep/frameprep.h"
#include "queue.h"
#include "shm_region.h"

/* fprep__memreg_kind: what a region is; the numbers are never reused. */
enum fprep__memreg_kind {
	FPREP__MEMREG_SHM = 1,  /* POSIX shared memory, host */
	FPREP__MEMREG_CUDA = 2, /* a client's device memory, CUDA IPC */
};

/* fprep__memreg_verb: the administrative operations. */
enum fprep__memreg_verb {
	FPREP__MEMREG_OPEN = 1,
	FPREP__MEMREG_CLOSE = 2,
};

typedef struct fprep__memreg fprep__memreg;

/* fprep__memreg_cb: called once per operation, from a backend thread,
 * after the operation ran (status set). */
typedef void (*fprep__memreg_cb)(fprep__memreg *r);

struct fprep__memreg {
	int kind;       /* enum fprep__memreg_kind */
	uint32_t id;    /* daemon-assigned once open, never 0 */
	uint32_t owner; /* nng pipe id of the registering connection */
	uint64_t size;  /* bytes, as registered */

	/* Kind-specific: what OPEN needs, and what it made. */
	union {
		struct {
			char name[FPREP_REGION_NAME_MAX + 1];
			uint64_t peer_uid; /* must own the object */
			uint64_t max_size; /* --max-region-bytes */
			fprep__shm_region *map;
		} shm;
		struct {
			uint8_t handle[FPREP_CUDA_HANDLE_SIZE];
			uint8_t uuid[FPREP_CUDA_UUID_SIZE];
			uint64_t offset; /* of the buffer in the allocation */
			void *opened;    /* what cudaIpcOpenMemHandle gave */
		} cuda;
	} u;

	/* Set by OPEN on the backend thread; read by the loop after done. */
	uint8_t *base;   /* address of the first byte jobs use: host memory,
	                    or device memory for FPREP__MEMREG_CUDA */
	int pinned;      /* base is page-locked for the device: DMA uses it */
	uint8_t *mapped; /* base's device address through the mapping of a
	                    GPU lane in mapped transfer mode, or NULL */

	/* The operation in progress (one at a time) and its result. */
	int verb; /* enum fprep__memreg_verb */
	int status;
	char message[FPREP_MESSAGE_SIZE];
	fprep__memreg_cb done;
	void *data;        /* the caller's (service/regions.c: its table) */
	fprep__qnode link; /* in the backend's administrative queue */

	/* Replies written into the region (service/reply.c), counted with
	 * release and read with acquire by the loop when a request names
	 * the region for its output: the daemon's own happens-before edge
	 * from the thread that answered one request there to the thread
	 * that writes the next one's tensor. The client carries that order
	 * in fact (it sends its next request after it saw the reply), but
	 * through another process, where the language's memory model and
	 * ThreadSanitizer do not follow it. */
	atomic_uint_fast64_t replies;
};

/* fprep__memreg_map does the host side of OPEN for r's kind (shm: check
 * the name, open, check owner and size, mmap; blocking system calls) and
 * sets r->base. A CUDA region has no host side: only a GPU lane opens it,
 * so here it is refused with FPREP_EUNSUPPORTED. Returns 0, or an enum
 * fprep_err with a sentence in r->message. Backend thread. */
int fprep__memreg_map(fprep__memreg *r);

/* fprep__memreg_unmap undoes fprep__memreg_map; nothing when r is not
 * mapped. A CUDA region still open is only forgotten here (its handle is
 * the lane's to close; the process is ending when this happens). */
void fprep__memreg_unmap(fprep__memreg *r);

/* fprep__memreg_broken tells whether the SIGBUS guard replaced r's pages
 * (the client shrank the object): what a job read or wrote there is not
 * the client's. Any thread. */
int fprep__memreg_broken(const fprep__memreg *r);

/* fprep__memreg_span checks that [offset, offset + len) lies inside r, with
 * overflow-safe arithmetic. Returns 0 or FPREP_EINVAL with a sentence
 * naming field in msg. */
int fprep__memreg_span(const fprep__memreg *r, uint64_t offset, uint64_t len,
                       const char *field, char *msg, size_t msg_size);

/* fprep__memreg_on_device tells whether r's base is device memory. */
static inline int fprep__memreg_on_device(const fprep__memreg *r)
{
	return r->kind == FPREP__MEMREG_CUDA;
}

/* fprep__memreg_describe writes a short name of r for logs: the shm name,
 * or "cuda" with the size. */
void fprep__memreg_describe(const fprep__memreg *r, char *buf, size_t size);

#endif /* FPREP_MEMREG_H */
