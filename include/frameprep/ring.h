/*
 * frameprep/ring.h: the bookkeeping of a ring of slots shared by several
 * threads: which slot is free, reserved, in flight or held, and how many
 * requests a connection may have in flight.
 *
 * A program that keeps frames in N slots of one shared-memory region
 * (fprep_region_open, a doorbell area after the slots) hands each slot to
 * one thread at a time: fprep_slots_take gives the least recently freed
 * slot, with a ticket that changes each time the slot is handed out, so a
 * late release of an earlier turn (a result dropped twice, a frame
 * cancelled after it was sent) never frees the slot of a later one.
 * fprep_gate caps the requests in flight on one connection at the
 * daemon's max_inflight_per_conn, so that threads sharing a ring wait
 * for a token rather than being refused with FPREP_EBUSY.
 *
 * Both are thread-safe: every call may be made from any thread, several
 * at once. Waits are on the monotonic clock.
 */
#ifndef FRAMEPREP_RING_H
#define FRAMEPREP_RING_H

#include <stdint.h>

#include "frameprep/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* fprep_slot_state: what a slot is doing. A reserved slot holds a frame
 * handed out and not yet sent, a taken one a request in flight, a held one
 * a result whose tensor the program still reads. */
enum fprep_slot_state {
	FPREP_SLOT_FREE = 0,
	FPREP_SLOT_RESERVED = 1,
	FPREP_SLOT_TAKEN = 2,
	FPREP_SLOT_HELD = 3
};

/* fprep_slots: the slot table of a ring of n slots. */
typedef struct fprep_slots fprep_slots;

/* fprep_slots_alloc makes a table of n (>= 1) free slots, handed out in
 * the order 0..n-1 first. Returns 0, FPREP_EINVAL (n 0) or FPREP_ENOMEM;
 * *sp is the table (free it with fprep_slots_free) or NULL. */
FPREP_EXTERN int fprep_slots_alloc(fprep_slots **sp, unsigned n);

/* fprep_slots_free frees s. No thread may be using it. NULL is ignored. */
FPREP_EXTERN void fprep_slots_free(fprep_slots *s);

/* fprep_slots_count returns the number of slots. */
FPREP_EXTERN unsigned fprep_slots_count(const fprep_slots *s);

/* fprep_slots_take hands out the least recently freed slot in state
 * (FPREP_SLOT_RESERVED or FPREP_SLOT_TAKEN) to holder (an id of the
 * calling thread chosen by the program), its number in *k and its new
 * ticket in *ticket, waiting up to timeout_ms (0: not at all) for one to
 * come free. Returns 0; FPREP_ETIMEDOUT when none came; FPREP_ECLOSED
 * once the table is closed; FPREP_EBUSY at once when mine is non-zero and
 * every slot is reserved or held by holder (none free, none in flight:
 * none would come while holder waits); FPREP_EINVAL for another state. */
FPREP_EXTERN int fprep_slots_take(fprep_slots *s, int state,
                                  unsigned long holder, int mine,
                                  unsigned timeout_ms, unsigned *k,
                                  uint64_t *ticket);

/* fprep_slots_step moves slot k, still handed out with ticket, from state
 * from to state to (reserved to taken when its frame is sent, taken to
 * held when its result is made), holder becoming its holder. Returns 1
 * when it did, 0 when the slot was handed out again, is in another state,
 * k is out of range, or the table is closed and to is not held. */
FPREP_EXTERN int fprep_slots_step(fprep_slots *s, unsigned k, uint64_t ticket,
                                  int from, int to, unsigned long holder);

/* fprep_slots_release frees slot k when it is still handed out with
 * ticket and (only_reserved non-zero) is reserved, and wakes a thread
 * waiting in fprep_slots_take. Returns 1 when it freed it, else 0 (an
 * earlier turn's release: nothing changes). */
FPREP_EXTERN int fprep_slots_release(fprep_slots *s, unsigned k,
                                     uint64_t ticket, int only_reserved);

/* fprep_slots_close hands out no slot any more and wakes every waiting
 * thread (FPREP_ECLOSED); fprep_slots_release still gives slots back
 * after it, and a taken slot may still become held. */
FPREP_EXTERN void fprep_slots_close(fprep_slots *s);

/* fprep_slots_closed returns whether s was closed. */
FPREP_EXTERN int fprep_slots_closed(fprep_slots *s);

/* fprep_slots_states copies each slot's state (enum fprep_slot_state)
 * into states[0..n-1] and its ticket into tickets[0..n-1] (either may be
 * NULL), n being fprep_slots_count, at one instant. */
FPREP_EXTERN void fprep_slots_states(fprep_slots *s, uint8_t *states,
                                     uint64_t *tickets);

/* fprep_slots_free_list copies up to max of the free slots, least
 * recently freed first, into ks; returns how many it copied. */
FPREP_EXTERN unsigned fprep_slots_free_list(fprep_slots *s, unsigned *ks,
                                            unsigned max);

/* fprep_gate: tokens, one per request a connection may have in flight. */
typedef struct fprep_gate fprep_gate;

/* fprep_gate_alloc makes a gate of n (>= 1) tokens. Returns 0,
 * FPREP_EINVAL (n < 1) or FPREP_ENOMEM; *gp is the gate or NULL. */
FPREP_EXTERN int fprep_gate_alloc(fprep_gate **gp, long n);

/* fprep_gate_free frees g. No thread may be using it. NULL is ignored. */
FPREP_EXTERN void fprep_gate_free(fprep_gate *g);

/* fprep_gate_take takes a token, waiting up to timeout_ms (0: not at all)
 * for one to be given back. Returns 1 when it took one, else 0. */
FPREP_EXTERN int fprep_gate_take(fprep_gate *g, unsigned timeout_ms);

/* fprep_gate_give gives a token back and wakes one waiting thread. */
FPREP_EXTERN void fprep_gate_give(fprep_gate *g);

/* fprep_gate_tokens returns the tokens free now. */
FPREP_EXTERN long fprep_gate_tokens(fprep_gate *g);

#ifdef __cplusplus
}
#endif

#endif /* FRAMEPREP_RING_H */
