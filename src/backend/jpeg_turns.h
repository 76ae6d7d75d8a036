/*
 * jpeg_turns.h: the order in which a backend's decoders take JPEG frames,
 * by turns between clients rather than by arrival.
 *
 * A JPEG decode can cost a hundred times another's (a progressive file up
 * to the scan caps, jpeg.h), so in arrival order one client's queue of
 * expensive files delays every other client's JPEGs by all of it. Here
 * queued frames wait in queues keyed by the requester's peer uid and,
 * within a uid, by its connection. Turns go round the uids with deficit
 * round robin, and within a uid round its connections the same way: a
 * key whose deficit is positive is served; one that is not gets a quantum
 * and waits for the next round. A decode's cost is its measured time:
 * each frame taken is charged an estimate (its connection's last decode),
 * corrected by the measure when the decode ends (fprep__jpeg_turns_charge).
 * A key whose decodes cost more gets fewer turns, so a frame of another
 * client waits for about one of the costly decodes per decoding thread,
 * not for that client's whole queue. A key keeps what it owes when its
 * queue empties (a client with one frame in flight pays for each), and
 * a positive deficit is dropped then, as in DRR.
 *
 * Memory is bounded and allocated once (fprep__jpeg_turns_init): max_keys
 * connection keys and as many uid keys. A key without queued frames stays
 * (with its debt) until its entry is needed for another; when every entry
 * holds queued frames, a new connection's frames share the turn of one of
 * its uid's keys, or of any queued key. Queuing never allocates: a frame
 * is linked through the fprep__qnode its owner gives (a job's or a staging
 * slot's link). The CPU backend queues its JPEG jobs in one; a GPU lane
 * queues its JPEG jobs for a staging slot in one and those slots for a
 * decoder in another, charging each decode to both.
 *
 * Threads: not thread-safe by itself. Every call but init and fini is
 * made with the mutex given to init held by the calling thread (the
 * backend's lock); Debug and sanitizer builds assert that it is locked.
 */
#ifndef FPREP_JPEG_TURNS_H
#define FPREP_JPEG_TURNS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "queue.h"

/* FPREP__JPEG_TURNS_KEYS: the keys a backend's turns hold (each of
 * connections and uids). */
#define FPREP__JPEG_TURNS_KEYS 256u

/* FPREP__JPEG_TURNS_QUANTUM_US: the decode time a key is given each round,
 * microseconds (about a 1080p baseline decode). */
#define FPREP__JPEG_TURNS_QUANTUM_US 5000u

/* fprep__jpeg_turn: what fprep__jpeg_turns_pop tells of the frame it
 * returns, for fprep__jpeg_turns_charge once the decode ended. */
typedef struct fprep__jpeg_turn {
	uint64_t uid; /* the frame's key */
	uint32_t conn;
	uint32_t est_us; /* what it was charged when taken */
} fprep__jpeg_turn;

typedef struct fprep__turns_key fprep__turns_key;

/* fprep__turns_ring: the keys with queued frames, in turn order. */
typedef struct fprep__turns_ring {
	fprep__turns_key *head;
	fprep__turns_key *tail;
} fprep__turns_ring;

/* fprep__jpeg_turns: a backend's queues of JPEG frames (see above). Its
 * fields are private to jpeg_turns.c. */
typedef struct fprep__jpeg_turns {
	pthread_mutex_t *lock;   /* held around every call */
	fprep__turns_key *conns; /* max_keys connection keys */
	fprep__turns_key *uids;  /* max_keys uid keys */
	unsigned max_keys;
	int64_t quantum_us;
	fprep__turns_ring ring; /* uid keys with queued frames */
	unsigned queued;        /* frames queued */
	unsigned keys;          /* connection keys with queued frames */
	uint64_t shared;        /* frames that shared another key's turn */
} fprep__jpeg_turns;

/* fprep__jpeg_turns_init makes t empty, with room for max_keys keys (0:
 * FPREP__JPEG_TURNS_KEYS) and quantum_us microseconds a round (0:
 * FPREP__JPEG_TURNS_QUANTUM_US); every later call is made with lock held.
 * Returns 0 or FPREP_ENOMEM. */
int fprep__jpeg_turns_init(fprep__jpeg_turns *t, pthread_mutex_t *lock,
                           unsigned max_keys, uint32_t quantum_us);

/* fprep__jpeg_turns_fini frees t's keys; nothing may be queued. */
void fprep__jpeg_turns_fini(fprep__jpeg_turns *t);

/* fprep__jpeg_turns_push queues the frame linked by node (not in another
 * queue) under key (uid, conn). Never fails. Lock held. */
void fprep__jpeg_turns_push(fprep__jpeg_turns *t, fprep__qnode *node,
                            uint64_t uid, uint32_t conn);

/* fprep__jpeg_turns_pop removes and returns the node of the frame whose
 * turn it is, filling *turn, or returns NULL when none is queued. Lock
 * held. */
fprep__qnode *fprep__jpeg_turns_pop(fprep__jpeg_turns *t,
                                    fprep__jpeg_turn *turn);

/* fprep__jpeg_turns_peek returns the node fprep__jpeg_turns_pop would
 * return now, leaving it queued (a decoder that takes it only if it fits
 * a batch), or NULL when none is queued. Lock held. */
fprep__qnode *fprep__jpeg_turns_peek(fprep__jpeg_turns *t);

/* fprep__jpeg_turns_charge corrects the charge of a frame taken as turn to
 * cost_us, its decode's measured time (microseconds), and makes it the
 * key's next estimate. A key no longer held is not charged. Lock held. */
void fprep__jpeg_turns_charge(fprep__jpeg_turns *t,
                              const fprep__jpeg_turn *turn, uint32_t cost_us);

/* fprep__jpeg_turns_oldest returns the oldest queued frame's node (each
 * key's queue is in arrival order; older: before(a, b) is true when a came
 * before b), or NULL when none is queued. Lock held. */
const fprep__qnode *fprep__jpeg_turns_oldest(
        const fprep__jpeg_turns *t,
        int (*before)(const fprep__qnode *a, const fprep__qnode *b));

/* fprep__jpeg_turns_text appends INFO lines to buf (size bytes,
 * NUL-terminated), each named name_...: NAME_queued (frames),
 * NAME_queued_keys (connections with frames queued) and NAME_turns_shared
 * (frames that shared a key's turn, the table being full). Lock held. */
void fprep__jpeg_turns_text(const fprep__jpeg_turns *t, const char *name,
                            char *buf, size_t size);

#endif /* FPREP_JPEG_TURNS_H */
