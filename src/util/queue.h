/*
 * queue.h: the one intrusive FIFO of frameprep.
 *
 * The design is simple: whatever is queued embeds an fprep__qnode and is
 * reached back with fprep__container_of. A queue is a head and a pointer to
 * the last link, so push, pop and splice are O(1) and allocate nothing. It
 * does no locking: each owner holds the lock it already has for its own
 * state (and its own condition variable or wake-up) around these calls. A
 * node is in at most one queue at a time.
 */
#ifndef FPREP_QUEUE_H
#define FPREP_QUEUE_H

#include <stddef.h>

/* fprep__container_of returns the structure of type type whose member
 * member is at ptr. */
#define fprep__container_of(ptr, type, member)                                 \
	((type *)(void *)((char *)(ptr)-offsetof(type, member)))

typedef struct fprep__qnode fprep__qnode;
struct fprep__qnode {
	fprep__qnode *next;
};

/* fprep__queue: a FIFO of nodes. Initialise with fprep__queue_init before
 * use; a queue that holds nodes owns none of them. */
typedef struct fprep__queue {
	fprep__qnode *head;
	fprep__qnode **tail; /* &head when empty, else &last->next */
} fprep__queue;

static inline void fprep__queue_init(fprep__queue *q)
{
	q->head = NULL;
	q->tail = &q->head;
}

static inline int fprep__queue_empty(const fprep__queue *q)
{
	return q->head == NULL;
}

/* fprep__queue_push appends n. */
static inline void fprep__queue_push(fprep__queue *q, fprep__qnode *n)
{
	n->next = NULL;
	*q->tail = n;
	q->tail = &n->next;
}

/* fprep__queue_pop removes and returns the first node, or NULL. */
static inline fprep__qnode *fprep__queue_pop(fprep__queue *q)
{
	fprep__qnode *n = q->head;

	if (n == NULL)
		return NULL;
	q->head = n->next;
	if (q->head == NULL)
		q->tail = &q->head;
	n->next = NULL;
	return n;
}

/* fprep__queue_splice appends every node of from to q, in order, and
 * leaves from empty. */
static inline void fprep__queue_splice(fprep__queue *q, fprep__queue *from)
{
	if (from->head == NULL)
		return;
	*q->tail = from->head;
	q->tail = from->tail;
	fprep__queue_init(from);
}

#endif /* FPREP_QUEUE_H */
