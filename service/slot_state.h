/*
 * slot_state.h: the state machine of a request slot (enum
 * fprep__slot_state, daemon.h): which step may follow which, every step
 * asserted (Debug and sanitizer builds), and the server's counts of busy
 * slots kept with it.
 *
 * The files that move a slot (the ports, slot.c, streams.c, answer.c)
 * include this one table; it is inline here so that none of them calls up
 * into another for a step: the ports hand a request down to slot.c, slot.c
 * to streams.c, and all of them to answer.c, never back.
 */
#ifndef FPREP_SERVICE_SLOT_STATE_H
#define FPREP_SERVICE_SLOT_STATE_H

#include "daemon.h"

/* fprep__slot_step_ok tells whether a slot may go from state from to
 * state to (enum fprep__slot_state): a bit per state a state leads to. */
static inline int fprep__slot_step_ok(int from, int to)
{
#define FPREP__TO(state) (1u << (state))
	static const unsigned next[] = {
	        [FPREP__SLOT_IDLE] = FPREP__TO(FPREP__SLOT_RECV) |
	                             FPREP__TO(FPREP__SLOT_IDLE),
	        [FPREP__SLOT_RECV] = FPREP__TO(FPREP__SLOT_WORK) |
	                             FPREP__TO(FPREP__SLOT_REGION) |
	                             FPREP__TO(FPREP__SLOT_SEND) |
	                             FPREP__TO(FPREP__SLOT_RECV) |
	                             FPREP__TO(FPREP__SLOT_IDLE),
	        [FPREP__SLOT_WORK] = FPREP__TO(FPREP__SLOT_SEND) |
	                             FPREP__TO(FPREP__SLOT_RECV) |
	                             FPREP__TO(FPREP__SLOT_IDLE),
	        [FPREP__SLOT_SEND] = FPREP__TO(FPREP__SLOT_RECV) |
	                             FPREP__TO(FPREP__SLOT_IDLE),
	        [FPREP__SLOT_REGION] = FPREP__TO(FPREP__SLOT_WORK) |
	                               FPREP__TO(FPREP__SLOT_SEND) |
	                               FPREP__TO(FPREP__SLOT_IDLE),
	};
#undef FPREP__TO
	return from >= FPREP__SLOT_IDLE && from <= FPREP__SLOT_REGION &&
	       (next[from] >> to & 1u) != 0;
}

/* fprep__slot_enter moves s to state to, asserting that the step is one of
 * the machine's (enum fprep__slot_state), and keeps srv->active (the
 * slots not IDLE) and srv->working (the slots in WORK). Loop thread. */
static inline void fprep__slot_enter(fprep__slot *s, int to)
{
	int from = s->state;

	FPREP__LOOP_ONLY(s->srv);
	FPREP__ASSERT(fprep__slot_step_ok(from, to));
	if (from == FPREP__SLOT_IDLE && to != FPREP__SLOT_IDLE)
		s->srv->active++;
	else if (from != FPREP__SLOT_IDLE && to == FPREP__SLOT_IDLE)
		s->srv->active--;
	if (to == FPREP__SLOT_WORK)
		s->srv->working++;
	else if (from == FPREP__SLOT_WORK)
		s->srv->working--;
	s->state = to;
}

#endif /* FPREP_SERVICE_SLOT_STATE_H */
