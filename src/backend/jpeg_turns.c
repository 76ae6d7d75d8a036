/*
 * jpeg_turns.c: JPEG frames served by turns between clients (jpeg_turns.h).
 *
 * The design is simple: two levels of the same deficit round robin. A
 * key (fprep__turns_key) is a connection or a uid; the uid keys with
 * queued frames form the top ring, and each holds a ring of its
 * connection keys with queued frames. A pop picks the uid whose turn it
 * is, then within it the connection, and takes that connection's oldest
 * frame. The served keys stay at their rings' heads while their deficits
 * are positive (several cheap frames in one turn), and go to the back
 * with a quantum when they are spent. Costs are only known after the
 * decode, so a frame is charged an estimate when taken and the difference
 * when it ends; deficits run negative, and a round where no key is
 * positive is skipped in one step (turns_ring_pick).
 *
 * Threads: every function runs with t->lock held (jpeg_turns.h), which
 * Debug and sanitizer builds check (TURNS_LOCKED).
 */
#include "jpeg_turns.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fprep_assert.h"
#include "frameprep/frameprep.h"

/* TURNS_LOCKED: t's lock is held (by some thread: pthread cannot tell
 * which; the callers' own asserts name the thread). */
#if FPREP__ASSERTS
#define TURNS_LOCKED(t) FPREP__ASSERT(pthread_mutex_trylock((t)->lock) == EBUSY)
#else
#define TURNS_LOCKED(t) ((void)0)
#endif

struct fprep__turns_key {
	fprep__turns_key *next; /* in its ring */
	int64_t deficit_us;     /* positive: may take a frame */
	unsigned queued;        /* frames queued under it */
	int used;               /* the entry names a key */
	uint64_t uid;
	uint32_t conn;          /* connection keys */
	uint32_t last_us;       /* connection keys: the last decode's time */
	fprep__turns_key *up;   /* connection keys: their uid's key */
	unsigned refs;          /* uid keys: connection keys naming it */
	fprep__turns_ring ring; /* uid keys: connections with queued frames */
	fprep__queue frames;    /* connection keys */
};

static void turns_ring_push(fprep__turns_ring *r, fprep__turns_key *k)
{
	k->next = NULL;
	if (r->tail != NULL)
		r->tail->next = k;
	else
		r->head = k;
	r->tail = k;
}

static fprep__turns_key *turns_ring_pop(fprep__turns_ring *r)
{
	fprep__turns_key *k = r->head;

	r->head = k->next;
	if (r->head == NULL)
		r->tail = NULL;
	k->next = NULL;
	return k;
}

/* turns_ring_pick returns the key of non-empty ring r whose turn it is,
 * leaving it at the head: the head while its deficit is positive; else
 * keys get a quantum each and go to the back, in turn, until one is
 * positive. When none is, the rounds before the first turns positive are
 * given at once. */
static fprep__turns_key *turns_ring_pick(fprep__turns_ring *r, int64_t q)
{
	int64_t rounds = INT64_MAX;

	for (fprep__turns_key *k = r->head; k != NULL && rounds > 0;
	     k = k->next) {
		int64_t n = k->deficit_us > 0 ? 0 : -k->deficit_us / q + 1;

		rounds = n < rounds ? n : rounds;
	}
	if (rounds > 1)
		for (fprep__turns_key *k = r->head; k != NULL; k = k->next)
			k->deficit_us += (rounds - 1) * q;
	while (r->head->deficit_us <= 0) {
		r->head->deficit_us += q;
		turns_ring_push(r, turns_ring_pop(r));
	}
	return r->head;
}

/* turns_ring_leave takes spent key k off the head of r (its queue
 * emptied): it keeps what it owes, not what it was given. */
static void turns_ring_leave(fprep__turns_ring *r, fprep__turns_key *k)
{
	FPREP__ASSERT(r->head == k && k->queued == 0);
	(void)turns_ring_pop(r);
	if (k->deficit_us > 0)
		k->deficit_us = 0;
}

/* turns_evict frees idle key k's entry: a connection's, or a uid's with
 * the connection keys naming it (all idle, as it is). */
static void turns_evict(fprep__jpeg_turns *t, fprep__turns_key *k)
{
	FPREP__ASSERT(k->queued == 0);
	if (k->up != NULL)
		k->up->refs--;
	for (unsigned i = 0; i < t->max_keys && k->refs > 0; i++)
		if (t->conns[i].used && t->conns[i].up == k)
			turns_evict(t, &t->conns[i]);
	FPREP__ASSERT(k->refs == 0);
	memset(k, 0, sizeof(*k));
}

/* turns_entry finds the entry of key (uid, conn) among t's connection keys
 * (is_conn) or uid keys (conn ignored), or frees one for it: an unused
 * one, else the idle one (no frames queued) that owes least. Returns NULL
 * when every entry holds frames. */
static fprep__turns_key *turns_entry(fprep__jpeg_turns *t, int is_conn,
                                     uint64_t uid, uint32_t conn)
{
	fprep__turns_key *keys = is_conn ? t->conns : t->uids;
	fprep__turns_key *free_k = NULL, *idle = NULL;

	for (unsigned i = 0; i < t->max_keys; i++) {
		fprep__turns_key *k = &keys[i];

		if (k->used && k->uid == uid && (!is_conn || k->conn == conn))
			return k;
		if (!k->used && free_k == NULL)
			free_k = k;
		else if (k->used && k->queued == 0 &&
		         (idle == NULL || k->deficit_us > idle->deficit_us))
			idle = k;
	}
	if (free_k == NULL && idle != NULL) {
		turns_evict(t, idle);
		free_k = idle;
	}
	if (free_k != NULL) {
		free_k->used = 1;
		free_k->uid = uid;
		free_k->conn = conn;
		fprep__queue_init(&free_k->frames);
	}
	return free_k;
}

/* turns_find returns the connection key of (uid, conn) when held. */
static fprep__turns_key *turns_find(fprep__jpeg_turns *t, uint64_t uid,
                                    uint32_t conn)
{
	for (unsigned i = 0; i < t->max_keys; i++)
		if (t->conns[i].used && t->conns[i].uid == uid &&
		    t->conns[i].conn == conn)
			return &t->conns[i];
	return NULL;
}

/* turns_shared: the key whose turn a frame of (uid, conn) shares when
 * every entry is held: a queued key of its uid, else any queued key. */
static fprep__turns_key *turns_shared(fprep__jpeg_turns *t, uint64_t uid)
{
	fprep__turns_key *any = NULL;

	for (unsigned i = 0; i < t->max_keys; i++) {
		fprep__turns_key *k = &t->conns[i];

		if (k->used && k->queued > 0 && k->uid == uid)
			return k;
		if (k->used && k->queued > 0 && any == NULL)
			any = k;
	}
	FPREP__ASSERT(any != NULL); /* all max_keys entries hold frames */
	return any;
}

int fprep__jpeg_turns_init(fprep__jpeg_turns *t, pthread_mutex_t *lock,
                           unsigned max_keys, uint32_t quantum_us)
{
	memset(t, 0, sizeof(*t));
	t->lock = lock;
	t->max_keys = max_keys > 0 ? max_keys : FPREP__JPEG_TURNS_KEYS;
	t->quantum_us =
	        quantum_us > 0 ? quantum_us : FPREP__JPEG_TURNS_QUANTUM_US;
	t->conns = calloc(t->max_keys, sizeof(*t->conns));
	t->uids = calloc(t->max_keys, sizeof(*t->uids));
	if (t->conns == NULL || t->uids == NULL) {
		fprep__jpeg_turns_fini(t);
		return FPREP_ENOMEM;
	}
	return FPREP_OK;
}

void fprep__jpeg_turns_fini(fprep__jpeg_turns *t)
{
	FPREP__ASSERT(t->queued == 0);
	free(t->conns);
	free(t->uids);
	t->conns = t->uids = NULL;
}

void fprep__jpeg_turns_push(fprep__jpeg_turns *t, fprep__qnode *node,
                            uint64_t uid, uint32_t conn)
{
	fprep__turns_key *c, *u = NULL;

	TURNS_LOCKED(t);
	c = turns_find(t, uid, conn);
	if (c == NULL) {
		u = turns_entry(t, 0, uid, 0);
		if (u != NULL)
			u->refs++; /* the connection key's up */
		c = u != NULL ? turns_entry(t, 1, uid, conn) : NULL;
		if (c == NULL) {
			if (u != NULL)
				u->refs--;
			c = turns_shared(t, uid);
			t->shared++;
		} else {
			c->up = u;
		}
	}
	u = c->up;
	fprep__queue_push(&c->frames, node);
	if (c->queued++ == 0) {
		turns_ring_push(&u->ring, c);
		t->keys++;
	}
	if (u->queued++ == 0)
		turns_ring_push(&t->ring, u);
	t->queued++;
}

fprep__qnode *fprep__jpeg_turns_pop(fprep__jpeg_turns *t,
                                    fprep__jpeg_turn *turn)
{
	fprep__turns_key *u, *c;
	fprep__qnode *node;
	uint32_t est;

	TURNS_LOCKED(t);
	if (t->queued == 0)
		return NULL;
	u = turns_ring_pick(&t->ring, t->quantum_us);
	c = turns_ring_pick(&u->ring, t->quantum_us);
	node = fprep__queue_pop(&c->frames);
	est = c->last_us > 0 ? c->last_us : (uint32_t)t->quantum_us;
	c->deficit_us -= est;
	u->deficit_us -= est;
	turn->uid = c->uid;
	turn->conn = c->conn;
	turn->est_us = est;
	t->queued--;
	if (--c->queued == 0) {
		turns_ring_leave(&u->ring, c);
		t->keys--;
	}
	if (--u->queued == 0)
		turns_ring_leave(&t->ring, u);
	return node;
}

fprep__qnode *fprep__jpeg_turns_peek(fprep__jpeg_turns *t)
{
	fprep__turns_key *u;

	TURNS_LOCKED(t);
	if (t->queued == 0)
		return NULL;
	/* The keys picked stay at their rings' heads, positive: the next
	 * pop picks them again. */
	u = turns_ring_pick(&t->ring, t->quantum_us);
	return turns_ring_pick(&u->ring, t->quantum_us)->frames.head;
}

void fprep__jpeg_turns_charge(fprep__jpeg_turns *t,
                              const fprep__jpeg_turn *turn, uint32_t cost_us)
{
	fprep__turns_key *c;
	int64_t more = (int64_t)cost_us - turn->est_us;

	TURNS_LOCKED(t);
	c = turns_find(t, turn->uid, turn->conn);
	if (c == NULL)
		return;
	c->last_us = cost_us > 0 ? cost_us : 1;
	c->deficit_us -= more;
	c->up->deficit_us -= more;
	/* An idle key keeps only what it owes. */
	if (c->queued == 0 && c->deficit_us > 0)
		c->deficit_us = 0;
	if (c->up->queued == 0 && c->up->deficit_us > 0)
		c->up->deficit_us = 0;
}

const fprep__qnode *fprep__jpeg_turns_oldest(
        const fprep__jpeg_turns *t,
        int (*before)(const fprep__qnode *a, const fprep__qnode *b))
{
	const fprep__qnode *old = NULL;

	TURNS_LOCKED(t);
	for (unsigned i = 0; i < t->max_keys; i++) {
		const fprep__qnode *h = t->conns[i].frames.head;

		if (t->conns[i].queued > 0 && (old == NULL || before(h, old)))
			old = h;
	}
	return old;
}

void fprep__jpeg_turns_text(const fprep__jpeg_turns *t, const char *name,
                            char *buf, size_t size)
{
	size_t len;

	TURNS_LOCKED(t);
	if (size == 0)
		return;
	len = strnlen(buf, size - 1);
	snprintf(buf + len, size - len,
	         "%s_queued: %u\n"
	         "%s_queued_keys: %u\n"
	         "%s_turns_shared: %llu\n",
	         name, t->queued, name, t->keys, name,
	         (unsigned long long)t->shared);
}
