/*
 * ring.c: a ring's slot table and its connection's in-flight gate
 * (frameprep/ring.h).
 *
 * The design is simple: one mutex and one condition variable (on the
 * monotonic clock) per object. The slot table keeps its free slots in a
 * FIFO, so the slot handed out is the one freed longest ago (its tensor
 * read longest ago), a state, a ticket and a holder per slot. A ticket
 * grows each time its slot is handed out: a step or a release names the
 * turn it is for, and a stale one changes nothing. A waiting thread is
 * woken for each slot freed (one) and when the table closes (all).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "frameprep/frameprep.h"
#include "frameprep/ring.h"

struct fprep_slots {
	pthread_mutex_t mtx;
	pthread_cond_t cv; /* a slot came free, or the table closed */
	unsigned n;
	uint8_t *state;        /* enum fprep_slot_state */
	uint64_t *ticket;      /* changes each time the slot is handed out */
	unsigned long *holder; /* the thread that reserved or holds it */
	unsigned *fifo;        /* the free slots, least recently freed first */
	unsigned head, count;
	int closed;
};

struct fprep_gate {
	pthread_mutex_t mtx;
	pthread_cond_t cv; /* a token came back */
	long tokens;       /* free now */
};

/* ring_sync_init makes mtx and cv, cv timed on the monotonic clock. */
static void ring_sync_init(pthread_mutex_t *mtx, pthread_cond_t *cv)
{
	pthread_condattr_t a;

	pthread_mutex_init(mtx, NULL);
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(cv, &a);
	pthread_condattr_destroy(&a);
}

/* ring_deadline sets *t to the monotonic clock's time ms from now. */
static void ring_deadline(struct timespec *t, unsigned ms)
{
	clock_gettime(CLOCK_MONOTONIC, t);
	t->tv_sec += (time_t)(ms / 1000);
	t->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (t->tv_nsec >= 1000000000L) {
		t->tv_sec++;
		t->tv_nsec -= 1000000000L;
	}
}

int fprep_slots_alloc(fprep_slots **sp, unsigned n)
{
	fprep_slots *s;

	*sp = NULL;
	if (n < 1)
		return FPREP_EINVAL;
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return FPREP_ENOMEM;
	s->state = calloc(n, 1);
	s->ticket = calloc(n, sizeof(*s->ticket));
	s->holder = calloc(n, sizeof(*s->holder));
	s->fifo = calloc(n, sizeof(*s->fifo));
	if (s->state == NULL || s->ticket == NULL || s->holder == NULL ||
	    s->fifo == NULL)
		goto err_arrays;
	ring_sync_init(&s->mtx, &s->cv);
	s->n = n;
	for (unsigned k = 0; k < n; k++)
		s->fifo[k] = k;
	s->count = n;
	*sp = s;
	return 0;

err_arrays:
	free(s->fifo);
	free(s->holder);
	free(s->ticket);
	free(s->state);
	free(s);
	return FPREP_ENOMEM;
}

void fprep_slots_free(fprep_slots *s)
{
	if (s == NULL)
		return;
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mtx);
	free(s->fifo);
	free(s->holder);
	free(s->ticket);
	free(s->state);
	free(s);
}

unsigned fprep_slots_count(const fprep_slots *s)
{
	return s->n;
}

/* slots_pop hands out the least recently freed slot (mtx held, one free). */
static unsigned slots_pop(fprep_slots *s, int state, unsigned long holder,
                          uint64_t *ticket)
{
	unsigned k = s->fifo[s->head];

	s->head = (s->head + 1) % s->n;
	s->count--;
	s->state[k] = (uint8_t)state;
	s->holder[k] = holder;
	*ticket = ++s->ticket[k];
	return k;
}

/* slots_all_mine: whether every slot is reserved or held by holder, none
 * free or in flight (mtx held). */
static int slots_all_mine(const fprep_slots *s, unsigned long holder)
{
	for (unsigned k = 0; k < s->n; k++)
		if ((s->state[k] != FPREP_SLOT_RESERVED &&
		     s->state[k] != FPREP_SLOT_HELD) ||
		    s->holder[k] != holder)
			return 0;
	return 1;
}

int fprep_slots_take(fprep_slots *s, int state, unsigned long holder, int mine,
                     unsigned timeout_ms, unsigned *k, uint64_t *ticket)
{
	struct timespec end;
	int err = 0, have_end = 0, timed = 0;

	if (state != FPREP_SLOT_RESERVED && state != FPREP_SLOT_TAKEN)
		return FPREP_EINVAL;
	pthread_mutex_lock(&s->mtx);
	for (;;) {
		if (s->closed) {
			err = FPREP_ECLOSED;
			break;
		}
		if (s->count > 0) {
			*k = slots_pop(s, state, holder, ticket);
			break;
		}
		if (mine && slots_all_mine(s, holder)) {
			err = FPREP_EBUSY;
			break;
		}
		if (timeout_ms == 0 || timed) {
			err = FPREP_ETIMEDOUT;
			break;
		}
		if (!have_end) {
			ring_deadline(&end, timeout_ms);
			have_end = 1;
		}
		if (pthread_cond_timedwait(&s->cv, &s->mtx, &end) == ETIMEDOUT)
			timed = 1; /* one more look, then give up */
	}
	pthread_mutex_unlock(&s->mtx);
	return err;
}

int fprep_slots_step(fprep_slots *s, unsigned k, uint64_t ticket, int from,
                     int to, unsigned long holder)
{
	int ok;

	pthread_mutex_lock(&s->mtx);
	ok = k < s->n && s->ticket[k] == ticket && s->state[k] == from &&
	     (!s->closed || to == FPREP_SLOT_HELD);
	if (ok) {
		s->state[k] = (uint8_t)to;
		s->holder[k] = holder;
	}
	pthread_mutex_unlock(&s->mtx);
	return ok;
}

int fprep_slots_release(fprep_slots *s, unsigned k, uint64_t ticket,
                        int only_reserved)
{
	int freed = 0;

	pthread_mutex_lock(&s->mtx);
	if (k < s->n && s->ticket[k] == ticket &&
	    s->state[k] != FPREP_SLOT_FREE &&
	    (!only_reserved || s->state[k] == FPREP_SLOT_RESERVED)) {
		s->state[k] = FPREP_SLOT_FREE;
		s->fifo[(s->head + s->count) % s->n] = k;
		s->count++;
		freed = 1;
		pthread_cond_signal(&s->cv);
	}
	pthread_mutex_unlock(&s->mtx);
	return freed;
}

void fprep_slots_close(fprep_slots *s)
{
	pthread_mutex_lock(&s->mtx);
	s->closed = 1;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mtx);
}

int fprep_slots_closed(fprep_slots *s)
{
	int closed;

	pthread_mutex_lock(&s->mtx);
	closed = s->closed;
	pthread_mutex_unlock(&s->mtx);
	return closed;
}

void fprep_slots_states(fprep_slots *s, uint8_t *states, uint64_t *tickets)
{
	pthread_mutex_lock(&s->mtx);
	for (unsigned k = 0; k < s->n; k++) {
		if (states != NULL)
			states[k] = s->state[k];
		if (tickets != NULL)
			tickets[k] = s->ticket[k];
	}
	pthread_mutex_unlock(&s->mtx);
}

unsigned fprep_slots_free_list(fprep_slots *s, unsigned *ks, unsigned max)
{
	unsigned n;

	pthread_mutex_lock(&s->mtx);
	n = s->count < max ? s->count : max;
	for (unsigned i = 0; i < n; i++)
		ks[i] = s->fifo[(s->head + i) % s->n];
	pthread_mutex_unlock(&s->mtx);
	return n;
}

int fprep_gate_alloc(fprep_gate **gp, long n)
{
	fprep_gate *g;

	*gp = NULL;
	if (n < 1)
		return FPREP_EINVAL;
	g = calloc(1, sizeof(*g));
	if (g == NULL)
		return FPREP_ENOMEM;
	ring_sync_init(&g->mtx, &g->cv);
	g->tokens = n;
	*gp = g;
	return 0;
}

void fprep_gate_free(fprep_gate *g)
{
	if (g == NULL)
		return;
	pthread_cond_destroy(&g->cv);
	pthread_mutex_destroy(&g->mtx);
	free(g);
}

int fprep_gate_take(fprep_gate *g, unsigned timeout_ms)
{
	struct timespec end;
	int got = 0;

	pthread_mutex_lock(&g->mtx);
	if (g->tokens == 0 && timeout_ms > 0) {
		ring_deadline(&end, timeout_ms);
		while (g->tokens == 0 &&
		       pthread_cond_timedwait(&g->cv, &g->mtx, &end) == 0)
			;
	}
	if (g->tokens > 0) {
		g->tokens--;
		got = 1;
	}
	pthread_mutex_unlock(&g->mtx);
	return got;
}

void fprep_gate_give(fprep_gate *g)
{
	pthread_mutex_lock(&g->mtx);
	g->tokens++;
	pthread_cond_signal(&g->cv);
	pthread_mutex_unlock(&g->mtx);
}

long fprep_gate_tokens(fprep_gate *g)
{
	long n;

	pthread_mutex_lock(&g->mtx);
	n = g->tokens;
	pthread_mutex_unlock(&g->mtx);
	return n;
}
