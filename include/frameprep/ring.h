/*
 * frameprep/ring.h: a ring of slots in one shared-memory region shared by
 * several threads (fprep_ring), and its bookkeeping: which slot is free,
 * reserved, in flight or held (fprep_slots), and how many requests a
 * connection may have in flight (fprep_gate).
 *
 * fprep_ring owns all of it: the region and its doorbell area, the slot
 * table, the leases on slots, the send of a slot's request and the wait
 * for its reply in the slot, and the registration of a new region when the
 * daemon restarted. The slot table and the gate are public too, for a
 * program that keeps its own region. A program that keeps frames in N
 * slots hands each slot to one thread at a time: fprep_slots_take gives the
 * least recently freed slot, with a ticket that changes each time the slot is
 * handed out, so a late release of an earlier turn (a result dropped twice, a
 * frame cancelled after it was sent) never frees the slot of a later one.
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
#include "frameprep/frameprep.h"

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

/* fprep_ring: N slots of one shared-memory region registered with the
 * daemon, each the room for one frame (uint8, frame_bytes) and one tensor
 * with its reply header after it, with a doorbell area after the slots
 * (one entry for each of the first FPREP_DOORBELL_ENTRIES_MAX slots) when
 * asked for. Slot k's tensor starts at fprep_ring_tensor's address (page
 * aligned), its reply header at the tensor's bytes rounded up to 8, its
 * frame at the next page boundary after the header.
 *
 * Threads take leases on slots (fprep_ring_take): a reserved slot's
 * frame is written by its lessee and then sent (fprep_ring_claim,
 * fprep_ring_send) or given back (fprep_ring_cancel); a taken slot is
 * sent at once; after its reply the lessee holds the slot while it reads
 * the tensor (fprep_ring_hold) and gives it back (fprep_ring_release).
 * A lease's ticket makes a late release of an earlier turn change
 * nothing.
 *
 * When the daemon restarts, the region goes with it. The ring then
 * registers a new region of the same layout and sends the request again
 * there (a count, the epoch, grows each time; a reply to a request sent
 * before a re-registration began is never taken). Frames and tensors of
 * earlier registrations stay mapped until fprep_ring_close: a lease
 * names the registration its frame or tensor lies in, and a frame written
 * in an earlier one is copied into the new one when it is sent.
 *
 * Every call may be made from any thread, several at once, except
 * fprep_ring_close. */
typedef struct fprep_ring fprep_ring;

/* fprep_ring_config: what fprep_ring_open makes. */
typedef struct fprep_ring_config {
	unsigned slots;      /* >= 1 (2 or more keep frames in flight) */
	size_t frame_bytes;  /* a slot's frame area, >= 1 */
	size_t tensor_bytes; /* a slot's tensor, >= 1 */
	int doorbell;        /* non-zero: keep a doorbell area (when the
	                        daemon refuses to poll it, requests go over
	                        nng) */
	unsigned timeout_ms; /* how long a re-registration is retried while
	                        the daemon is away; 0: 30 s */
	fprep_gate *gate;    /* the connection's in-flight tokens shared
	                        with its other users, or NULL; not owned, it
	                        must outlive the ring */
} fprep_ring_config;

/* fprep_ring_lease: one turn of one slot, as fprep_ring_take gives it. */
typedef struct fprep_ring_lease {
	unsigned slot;   /* the slot's number, 0..slots-1 */
	uint64_t ticket; /* the turn (fprep_slots_take's ticket) */
	uint64_t epoch;  /* the registration its frame and tensor lie in */
} fprep_ring_lease;

/* fprep_ring_open creates a region of cfg->slots slots for client,
 * registers it (fprep_region_open) and, when cfg->doorbell, asks the
 * daemon to poll its doorbell area (fprep_region_doorbell; a refusal
 * leaves the ring on nng). Returns 0, FPREP_EINVAL (no slots, zero sizes,
 * a size overflow), FPREP_ENOMEM or fprep_region_open's errors; *rp is
 * the ring (fprep_ring_close frees it) or NULL. */
FPREP_EXTERN int fprep_ring_open(fprep_ring **rp, fprep_client *client,
                                 const fprep_ring_config *cfg);

/* fprep_ring_unregister stops the ring: no slot is handed out any more
 * (fprep_ring_take: FPREP_ECLOSED, waiting threads woken), no request is
 * sent (fprep_ring_send: FPREP_ECLOSED) and the region is unregistered
 * (best effort), after a re-registration under way ended. Leases may
 * still be released, and every mapping stays until fprep_ring_close.
 * Calling it again does nothing. */
FPREP_EXTERN void fprep_ring_unregister(fprep_ring *ring);

/* fprep_ring_close unregisters the ring (fprep_ring_unregister), unmaps
 * every region it made and frees it. No thread may be using it, no
 * request submitted on it may be pending, and no memory of it may be read
 * after. NULL is ignored. */
FPREP_EXTERN void fprep_ring_close(fprep_ring *ring);

/* fprep_ring_forget unmaps every region of the ring and frees it without
 * a word to the daemon: for a ring whose client was closed (the
 * connection's end dropped the daemon's side) or inherited by a forked
 * child (the parent's connection still holds its regions). No thread may
 * be using it. NULL is ignored. */
FPREP_EXTERN void fprep_ring_forget(fprep_ring *ring);

/* fprep_ring_slots returns the number of slots. */
FPREP_EXTERN unsigned fprep_ring_slots(const fprep_ring *ring);

/* fprep_ring_table returns the ring's slot table (its states for
 * fprep_slots_states and fprep_slots_free_list), owned by the ring. */
FPREP_EXTERN fprep_slots *fprep_ring_table(fprep_ring *ring);

/* fprep_ring_size returns the region's size in bytes (the slots and the
 * doorbell area). */
FPREP_EXTERN size_t fprep_ring_size(const fprep_ring *ring);

/* fprep_ring_out_capacity returns a slot's tensor area with its reply
 * header (tensor bytes rounded up to 8, plus FPREP_REPLY_HEADER_SIZE). */
FPREP_EXTERN size_t fprep_ring_out_capacity(const fprep_ring *ring);

/* fprep_ring_epoch returns the registration now in use: 0 for the first,
 * one more for each re-registration begun. */
FPREP_EXTERN uint64_t fprep_ring_epoch(fprep_ring *ring);

/* fprep_ring_region_id returns the id the daemon gave the region now in
 * use. */
FPREP_EXTERN uint32_t fprep_ring_region_id(fprep_ring *ring);

/* fprep_ring_doorbell returns whether the daemon polls the doorbell area
 * of the region now in use. */
FPREP_EXTERN int fprep_ring_doorbell(fprep_ring *ring);

/* fprep_ring_frame returns where slot k's frame lies (frame_bytes) in the
 * region now in use, or NULL when k is out of range. */
FPREP_EXTERN void *fprep_ring_frame(fprep_ring *ring, unsigned k);

/* fprep_ring_tensor returns where slot k's tensor lands (tensor_bytes)
 * in the region now in use, or NULL when k is out of range. */
FPREP_EXTERN const void *fprep_ring_tensor(fprep_ring *ring, unsigned k);

/* fprep_ring_lease_frame returns where the lease's frame lies
 * (frame_bytes), in the registration it names (mapped until
 * fprep_ring_close). */
FPREP_EXTERN uint8_t *fprep_ring_lease_frame(fprep_ring *ring,
                                             const fprep_ring_lease *lease);

/* fprep_ring_lease_tensor returns where the lease's tensor lies
 * (tensor_bytes, then the reply header), in the registration it names
 * (mapped until fprep_ring_close). */
FPREP_EXTERN const uint8_t *
fprep_ring_lease_tensor(fprep_ring *ring, const fprep_ring_lease *lease);

/* fprep_ring_take takes a lease on the least recently freed slot in state
 * (FPREP_SLOT_RESERVED: its frame is written, then sent or cancelled;
 * FPREP_SLOT_TAKEN: sent at once) for holder (an id of the calling
 * thread chosen by the program), waiting up to timeout_ms (0: not at
 * all). Returns 0 and *lease; FPREP_ETIMEDOUT, FPREP_ECLOSED, FPREP_EBUSY
 * (mine non-zero and holder holds every slot, none in flight) or
 * FPREP_EINVAL as fprep_slots_take. */
FPREP_EXTERN int fprep_ring_take(fprep_ring *ring, int state,
                                 unsigned long holder, int mine,
                                 unsigned timeout_ms, fprep_ring_lease *lease);

/* fprep_ring_claim moves a reserved lease's slot to taken, before it is
 * sent. Returns 1, or 0 when the lease is stale or not reserved. */
FPREP_EXTERN int fprep_ring_claim(fprep_ring *ring,
                                  const fprep_ring_lease *lease);

/* fprep_ring_hold moves a taken lease's slot, its reply in, to held by
 * holder (which then reads its tensor). Returns 1, or 0 when stale. */
FPREP_EXTERN int fprep_ring_hold(fprep_ring *ring,
                                 const fprep_ring_lease *lease,
                                 unsigned long holder);

/* fprep_ring_release gives the lease's slot back, whatever its state.
 * Returns 1, or 0 for a stale lease (a later turn is left alone). */
FPREP_EXTERN int fprep_ring_release(fprep_ring *ring,
                                    const fprep_ring_lease *lease);

/* fprep_ring_cancel gives the lease's slot back only while it is
 * reserved (its frame never sent). Returns 1, or 0. */
FPREP_EXTERN int fprep_ring_cancel(fprep_ring *ring,
                                   const fprep_ring_lease *lease);

/* fprep_ring_send sends req for the taken lease's slot and waits for its
 * reply, which lands in the slot (req->shm_reply set here). The frame
 * (req's format, size, stride and planes, req->input_size bytes from its
 * first to its last byte) lies frame_offset bytes into the slot's frame
 * area; req's regions and offsets are set here. The request goes through
 * the slot's doorbell entry while the daemon polls it, else over nng
 * (fprep_region_request), at most cfg->gate's tokens at once.
 *
 * When the daemon forgot the region (a lost connection, FPREP_EREGION)
 * the ring registers a new one (once for every thread that found the
 * same registration stale), copies the frame there when it was written in
 * the old one, and sends again; a reply that came after a
 * re-registration began is dropped and the request sent again; at most
 * 4 attempts. lease->epoch then names the registration that holds the
 * tensor. Returns 0 with *res (the daemon's status in res->header.status;
 * free it with fprep_result_fini); FPREP_EINVAL (a lease whose slot is
 * not taken with its ticket: stale, or reserved and not claimed; a frame
 * past the slot's frame area), FPREP_ECLOSED, FPREP_ETIMEDOUT (no gate
 * token within cfg->timeout_ms, or no reply within the client's
 * timeout), FPREP_EREGION (the
 * daemon forgot the region 4 times in a row, or re-registration failed)
 * or fprep_region_request's errors, *res empty. One call per lease at a
 * time. */
FPREP_EXTERN int fprep_ring_send(fprep_ring *ring, fprep_ring_lease *lease,
                                 fprep_request *req, uint64_t frame_offset,
                                 fprep_result *res);

/* fprep_ring_submit submits req for the frame in slot k of the region now
 * in use (req->input_size bytes already written there), its tensor to land
 * in slot k, like fprep_client_submit (cb, arg and *pp as there), taking
 * no lease and sending no request again after a restart: for one thread
 * that keeps every slot to itself. Returns 0, FPREP_EINVAL (k out of
 * range, or the frame or the request's tensor larger than the slot), or
 * fprep_client_submit's errors. The slot's frame may be rewritten once
 * the reply arrived (FPREP_REPLY_F_INPUT_RELEASED). */
FPREP_EXTERN int fprep_ring_submit(fprep_ring *ring, unsigned k,
                                   fprep_request *req, fprep_done_fn cb,
                                   void *arg, fprep_pending **pp);

#ifdef __cplusplus
}
#endif

#endif /* FRAMEPREP_RING_H */
