/*
 * streams.c: video streams in frameprepd's loop (streams.h; protocol.h,
 * "Video streams").
 *
 * The design is simple: a stream is an entry in one table, with the
 * connection that opened it, its peer's uid (for the per-uid limit), the
 * backend's decoder session (video.h), the slots whose jobs are out on it
 * and a ring of the slots whose requests wait behind those. A stream has
 * at most its session's window of jobs out at a time (video.h: one, or
 * more for a session that runs them in order on one thread), handed over
 * in the order they came, so its packets are decoded in that order and
 * its session needs no lock; streams run beside each other on the
 * backend's threads. STREAM_OPEN is a stream's first job, alone (the
 * decoder opens on the backend's thread, reading the parameter sets
 * there); STREAM_CLOSE waits until every job before it has ended and then
 * ends the stream on the loop. nng hands requests that arrive together to
 * the loop in any order, so a client with several of a stream's requests
 * in flight numbers them (seq, protocol.h): the ring keeps them in that
 * order, and one whose predecessor has not come yet waits for it. A stream job
 * always comes back to the loop (FPREP__EV_DONE), which answers it and starts
 * the stream's next request: its reply message was allocated by the backend's
 * thread (job->reserve), which wrote the tensors into it (or into the region
 * the request named, streams_output: then the message holds only the frame
 * records), so the loop copies no pixels. When the connection closes its
 * streams go: the waiting requests are answered FPREP_ECLOSED, and a stream
 * whose job is out goes when the job ends.
 */
#include <inttypes.h>
#include <nng/nng.h>
#include <nng/transport/ipc/ipc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "daemon.h"
#include "log.h"
#include "reply.h"
#include "slot_state.h"
#include "streams.h"

/* A request that waits its turn in its stream: its number (seq,
 * protocol.h; 0: none), and whether it is only to be refused then (with
 * its job's status and message: fprep__streams_refuse). */
typedef struct streams_waiting {
	fprep__slot *s;
	uint32_t seq;
	int refused;
} streams_waiting;

struct fprep__stream {
	uint32_t id;
	uint32_t pipe;       /* the connection that opened it */
	uint64_t uid;        /* its peer's uid; UINT64_MAX: not known */
	fprep_request spec;  /* its STREAM_OPEN: the tensors' spec */
	fprep__video *video; /* the backend's decoder session */
	fprep__slot **out;   /* the nout slots whose jobs are out, in the
	                        order they were handed over (window room) */
	unsigned nout, window;
	int opened;            /* its STREAM_OPEN job succeeded */
	streams_waiting *wait; /* a ring of cap requests waiting their turn */
	unsigned head, count, cap;
	uint32_t next_seq; /* the seq due next; those after it wait for it */
	int closed;        /* no new requests: it goes once idle */
};

static fprep__stream *streams_find(fprep__streams *t, uint32_t id,
                                   uint32_t pipe)
{
	for (unsigned i = 0; i < t->n; i++)
		if (t->tab[i]->id == id && t->tab[i]->pipe == pipe &&
		    !t->tab[i]->closed)
			return t->tab[i];
	return NULL;
}

/* streams_count counts the open streams of a connection, or of a uid. */
static unsigned streams_count(const fprep__streams *t, uint32_t pipe,
                              uint64_t uid, int by_uid)
{
	unsigned n = 0;

	for (unsigned i = 0; i < t->n; i++)
		if (!t->tab[i]->closed &&
		    (by_uid ? t->tab[i]->uid == uid : t->tab[i]->pipe == pipe))
			n++;
	return n;
}

/* streams_free takes st out of the table and frees it: nothing of it is
 * out or waits. */
static void streams_free(fprep__streams *t, fprep__stream *st)
{
	FPREP__ASSERT(st->nout == 0 && st->count == 0);
	for (unsigned i = 0; i < t->n; i++)
		if (t->tab[i] == st) {
			t->tab[i] = t->tab[--t->n];
			break;
		}
	if (st->video != NULL)
		st->video->ops->close(st->video);
	free(st->out);
	free(st->wait);
	free(st);
}

/* streams_reserve: job->reserve of a stream job (backend.h), on the
 * backend's thread: the reply message, with room for bytes of payload,
 * in the slot, which the thread owns until the job's event. */
static uint8_t *streams_reserve(fprep__job *job, uint64_t bytes)
{
	fprep__slot *s = job->data;
	uint8_t *room;

	if (fprep__reply_tensor_alloc(&s->rep_msg, bytes, &room) != 0)
		return NULL;
	return room;
}

/* streams_job_done: a stream job's done (backend.h), on the backend's
 * thread: always back to the loop (fprep__streams_done). */
static void streams_job_done(fprep__job *job)
{
	fprep__slot *s = job->data;

	s->ev.kind = FPREP__EV_DONE;
	fprep__evq_push(&s->srv->evq, &s->ev);
}

/* streams_output points s's job for a PACKET or FLUSH (*sr) whose
 * tensors go to a region at it (protocol.h, "Tensors in a region"): the
 * region checked as a FRAME's output is, and, for a CUDA region, on the
 * GPU that decodes st. Returns 0, or -1 after answering s. */
static int streams_output(fprep__stream *st, fprep__slot *s,
                          const fprep_stream_request *sr)
{
	fprep__job *job = &s->job;
	fprep__memreg *out;

	if (sr->output_loc == FPREP_LOC_CUDA && !st->video->on_device) {
		fprep__answer_fail(
		        s, FPREP_EUNSUPPORTED,
		        "output_loc CUDA: this stream decodes on the "
		        "CPU; its tensors go inline or to a "
		        "shared-memory region");
		return -1;
	}
	out = fprep__place_output(s, sr->output_loc, sr->out_region,
	                          sr->out_offset, sr->out_capacity);
	if (out == NULL)
		return -1;
	if (sr->output_loc == FPREP_LOC_CUDA &&
	    memcmp(out->u.cuda.uuid, st->video->uuid,
	           sizeof(st->video->uuid)) != 0) {
		char why[FPREP_MESSAGE_SIZE];

		snprintf(why, sizeof(why),
		         "out_region %" PRIu32 " is on another GPU than the "
		         "one that decodes stream %" PRIu32,
		         sr->out_region, st->id);
		fprep__answer_fail(s, FPREP_EREGION, why);
		return -1;
	}
	job->req.output_loc = sr->output_loc;
	job->req.out_region = sr->out_region;
	job->req.out_offset = sr->out_offset;
	job->req.out_capacity = sr->out_capacity;
	fprep__place_job_output(s, out, sr->out_offset);
	return 0;
}

/* streams_submit hands st's job for s's request (kind STREAM_OPEN, or a
 * decoded PACKET or FLUSH in *sr) to the backend. */
static void streams_submit(fprep__stream *st, fprep__slot *s,
                           const fprep_stream_request *sr)
{
	fprep__server *srv = s->srv;
	fprep__job *job = &s->job;
	char why[FPREP_MESSAGE_SIZE];
	int rv;

	memset(job, 0, sizeof(*job));
	job->req = st->spec;
	job->req.kind = s->kind;
	job->req.request_id = s->request_id;
	job->req.input_size = 0;
	if (sr != NULL)
		job->stream = *sr;
	job->stream.kind = s->kind;
	job->input = s->req + FPREP_REQUEST_HEADER_SIZE;
	job->video = st->video;
	job->reserve = streams_reserve;
	s->limits = srv->cfg->limits;
	job->limits = &s->limits;
	job->done = streams_job_done;
	job->data = s;
	if (sr != NULL && sr->output_loc != FPREP_LOC_INLINE &&
	    streams_output(st, s, sr) != 0)
		return;
	FPREP__ASSERT(st->nout < st->window);
	st->out[st->nout++] = s;
	fprep__slot_enter(s, FPREP__SLOT_WORK);
	rv = srv->backend->submit(srv->backend, job);
	if (rv != 0) {
		st->nout--;
		snprintf(why, sizeof(why), "backend %s refused the job: %s",
		         srv->backend->name, fprep_strerror(rv));
		fprep__answer_fail(s, rv, why);
	}
}

/* streams_room tells whether st's next waiting request s may start now:
 * a job fits in its window (one until it is opened), and a STREAM_CLOSE
 * waits until no job is out. One that is only answered (the stream
 * closed, the backend gone) always may. */
static int streams_room(const fprep__stream *st, const streams_waiting *w)
{
	const fprep__slot *s = w->s;

	if (st->closed || s->srv->backend == NULL)
		return 1;
	if (w->seq != 0 && w->seq != st->next_seq)
		return 0; /* the one before it has not come yet */
	if (w->refused)
		return 1;
	if (s->kind == FPREP_KIND_STREAM_CLOSE)
		return st->nout == 0;
	return st->nout < (st->opened ? st->window : 1);
}

/* streams_next starts st's waiting requests while they have room
 * (streams_room), and frees a closed stream once it is idle. */
static void streams_next(fprep__streams *t, fprep__stream *st)
{
	char why[FPREP_MESSAGE_SIZE];
	fprep_stream_request sr;
	fprep__slot *s;
	int rv;

	while (st->count > 0 && streams_room(st, &st->wait[st->head])) {
		streams_waiting w = st->wait[st->head];

		s = w.s;
		if (w.seq != 0)
			st->next_seq = w.seq + 1;
		st->head = (st->head + 1) % st->cap;
		st->count--;
		if (w.refused && !st->closed && s->srv->backend != NULL) {
			fprep__answer_fail(s, s->job.status, s->job.message);
			continue;
		}
		if (st->closed || s->srv->backend == NULL) {
			fprep__answer_fail(s, FPREP_ECLOSED,
			                   "the stream was closed before this "
			                   "request's turn");
			continue;
		}
		if (s->kind == FPREP_KIND_STREAM_CLOSE) {
			st->closed = 1;
			fprep__answer_ok(s, 0, "", NULL);
			continue;
		}
		/* Refused when it came, if it fails (streams_take). */
		rv = fprep_stream_request_decode(s->req, s->req_len,
		                                 &s->srv->cfg->limits, &sr, why,
		                                 sizeof(why));
		if (rv != 0)
			fprep__answer_fail(s, rv, why);
		else
			streams_submit(st, s, &sr);
	}
	if (st->closed && st->nout == 0 && st->count == 0)
		streams_free(t, st);
}

/* streams_uid: the uid of the peer of s's connection, or UINT64_MAX. */
static uint64_t streams_uid(const fprep__slot *s)
{
	uint64_t uid;

	if (s->req_msg != NULL &&
	    nng_pipe_get_uint64(nng_msg_get_pipe(s->req_msg),
	                        NNG_OPT_IPC_PEER_UID, &uid) == 0)
		return uid;
	return UINT64_MAX;
}

/* streams_open opens a stream for s's STREAM_OPEN req: the limits, the
 * table entry, the backend's session; the decoder opens in its job. */
static void streams_open(fprep__slot *s, const fprep_request *req)
{
	fprep__server *srv = s->srv;
	fprep__streams *t = &srv->streams;
	const fprep_limits *lim = &srv->cfg->limits;
	uint64_t uid = streams_uid(s);
	char why[FPREP_MESSAGE_SIZE];
	fprep__stream *st, **tab;
	unsigned n;
	int rv;

	if (srv->backend->video_open == NULL) {
		snprintf(why, sizeof(why),
		         "backend %s has no video decoder (NVDEC is not "
		         "there yet): streams need the CPU backend",
		         srv->backend->name);
		fprep__answer_fail(s, FPREP_EUNSUPPORTED, why);
		return;
	}
	if ((n = streams_count(t, s->pipe, 0, 0)) >=
	    lim->max_streams_per_conn) {
		snprintf(why, sizeof(why),
		         "this connection has %u streams open: the limit is "
		         "max_streams_per_conn %" PRIu32,
		         n, lim->max_streams_per_conn);
		fprep__answer_fail(s, FPREP_ELIMIT, why);
		return;
	}
	if ((n = streams_count(t, 0, uid, 1)) >= lim->max_streams_per_uid) {
		snprintf(why, sizeof(why),
		         "this peer's uid has %u streams open: the limit is "
		         "max_streams_per_uid %" PRIu32,
		         n, lim->max_streams_per_uid);
		fprep__answer_fail(s, FPREP_ELIMIT, why);
		return;
	}
	if (t->n == t->cap) {
		unsigned cap = t->cap ? 2 * t->cap : 16;

		tab = realloc(t->tab, cap * sizeof(*tab));
		if (tab == NULL) {
			fprep__answer_fail(s, FPREP_ENOMEM,
			                   "stream table: out of memory");
			return;
		}
		t->tab = tab;
		t->cap = cap;
	}
	st = calloc(1, sizeof(*st));
	if (st == NULL ||
	    (st->wait = calloc(srv->nslots, sizeof(*st->wait))) == NULL) {
		free(st);
		fprep__answer_fail(s, FPREP_ENOMEM, "stream: out of memory");
		return;
	}
	st->cap = srv->nslots;
	st->next_seq = 1;
	rv = srv->backend->video_open(srv->backend, req,
	                              s->req + FPREP_REQUEST_HEADER_SIZE,
	                              (size_t)req->input_size, &st->video);
	if (rv != 0) {
		free(st->wait);
		free(st);
		fprep__answer_fail(s, rv, "stream decoder: out of memory");
		return;
	}
	st->window = st->video->window > 1 ? st->video->window : 1;
	if (st->window > srv->nslots)
		st->window = srv->nslots;
	st->out = calloc(st->window, sizeof(*st->out));
	if (st->out == NULL) {
		st->video->ops->close(st->video);
		free(st->wait);
		free(st);
		fprep__answer_fail(s, FPREP_ENOMEM, "stream: out of memory");
		return;
	}
	if (t->next_id == 0)
		t->next_id = 1;
	st->id = t->next_id++;
	st->pipe = s->pipe;
	st->uid = uid;
	st->spec = *req;
	t->tab[t->n++] = st;
	streams_submit(st, s, NULL);
}

/* streams_seq_bad refuses a seq (protocol.h) already served, or further
 * ahead of the one due than the ring holds (then it cannot be in flight
 * with those before it), or twice in the ring, naming it in why. */
static int streams_seq_bad(const fprep__stream *st, uint32_t seq, char *why,
                           size_t size)
{
	if (seq == 0)
		return 0;
	if (seq < st->next_seq || seq - st->next_seq >= st->cap) {
		if (why != NULL)
			snprintf(why, size,
			         "seq %" PRIu32
			         ": the stream's next is %" PRIu32
			         ", and at most %u requests wait",
			         seq, st->next_seq, st->cap);
		return 1;
	}
	for (unsigned k = 0; k < st->count; k++)
		if (st->wait[(st->head + k) % st->cap].seq == seq) {
			if (why != NULL)
				snprintf(why, size,
				         "seq %" PRIu32
				         " came twice on the stream",
				         seq);
			return 1;
		}
	return 0;
}

/* streams_wait puts s, whose request has number seq (0: none), in st's
 * ring (refused: only to be refused in its turn): at the tail, or a
 * numbered one before the first waiting request numbered after it. */
static void streams_wait(fprep__stream *st, fprep__slot *s, uint32_t seq,
                         int refused)
{
	unsigned at = st->count;

	/* At most one request a slot: the ring never fills. */
	FPREP__ASSERT(st->count < st->cap);
	if (seq != 0)
		for (unsigned k = 0; k < st->count; k++) {
			uint32_t w = st->wait[(st->head + k) % st->cap].seq;

			if (w != 0 && w > seq) {
				at = k;
				break;
			}
		}
	for (unsigned k = st->count; k > at; k--) {
		unsigned to = (st->head + k) % st->cap;
		unsigned from = (st->head + k - 1) % st->cap;

		st->wait[to] = st->wait[from];
	}
	st->wait[(st->head + at) % st->cap] =
	        (streams_waiting){.s = s, .seq = seq, .refused = refused};
	st->count++;
}

void fprep__streams_take(fprep__slot *s, const fprep_request *req)
{
	fprep__streams *t = &s->srv->streams;
	char why[FPREP_MESSAGE_SIZE];
	fprep_stream_request sr;
	fprep__stream *st;
	int rv;

	FPREP__LOOP_ONLY(s->srv);
	if (req->kind == FPREP_KIND_STREAM_OPEN) {
		streams_open(s, req);
		return;
	}
	rv = fprep_stream_request_decode(s->req, s->req_len,
	                                 &s->srv->cfg->limits, &sr, why,
	                                 sizeof(why));
	if (rv != 0) {
		fprep__answer_fail(s, rv, why);
		return;
	}
	st = streams_find(t, sr.stream_id, s->pipe);
	if (st == NULL) {
		snprintf(why, sizeof(why),
		         "stream_id %" PRIu32 " is not an open stream of this "
		         "connection",
		         sr.stream_id);
		fprep__answer_fail(s, FPREP_EINVAL, why);
		return;
	}
	if (streams_seq_bad(st, sr.seq, why, sizeof(why))) {
		fprep__answer_fail(s, FPREP_EINVAL, why);
		return;
	}
	streams_wait(st, s, sr.seq, 0);
	streams_next(t, st);
}

int fprep__streams_refuse(fprep__slot *s, int status, const char *why)
{
	fprep__streams *t = &s->srv->streams;
	fprep_stream_request sr;
	fprep__stream *st;

	FPREP__LOOP_ONLY(s->srv);
	/* Its header's fields are read before the checks that refuse it. */
	(void)fprep_stream_request_decode(s->req, s->req_len,
	                                  &s->srv->cfg->limits, &sr, NULL, 0);
	if ((sr.kind != FPREP_KIND_STREAM_PACKET &&
	     sr.kind != FPREP_KIND_STREAM_FLUSH &&
	     sr.kind != FPREP_KIND_STREAM_CLOSE) ||
	    sr.seq == 0 || sr.stream_id == 0 ||
	    (st = streams_find(t, sr.stream_id, s->pipe)) == NULL ||
	    streams_seq_bad(st, sr.seq, NULL, 0))
		return 0;
	s->job.status = status;
	snprintf(s->job.message, sizeof(s->job.message), "%s", why);
	streams_wait(st, s, sr.seq, 1);
	streams_next(t, st);
	return 1;
}

/* streams_reply answers s's PACKET or FLUSH job, which succeeded: its
 * frames' tensors and records are in the reply message. */
static void streams_reply(fprep__slot *s)
{
	fprep__job *job = &s->job;
	fprep_reply_header h;
	nng_msg *msg;
	uint8_t *room;
	uint64_t now = fprep__now_ns();

	if (s->rep_msg == NULL &&
	    fprep__reply_tensor_alloc(&s->rep_msg, 0, &room) != 0) {
		fprep__answer_fail(s, FPREP_ENOMEM, "reply: out of memory");
		return;
	}
	job->message[0] = '\0';
	fprep__reply_header_tensor(
	        &h, job, fprep__reply_us(s->t_recv_ns, job->t_start_ns),
	        fprep__reply_us(s->t_recv_ns, now));
	/* The header counts the tensors only when they are inline. */
	h.payload_size += (uint64_t)job->frames * FPREP_STREAM_FRAME_SIZE;
	h.flags |= job->reply_flags;
	msg = s->rep_msg;
	s->rep_msg = NULL;
	fprep__answer_reply(s, &h, msg);
}

void fprep__streams_done(fprep__slot *s)
{
	fprep__streams *t = &s->srv->streams;
	fprep__job *job = &s->job;
	fprep__stream *st = NULL;
	unsigned k = 0;

	FPREP__LOOP_ONLY(s->srv);
	for (unsigned i = 0; i < t->n && st == NULL; i++)
		for (k = 0; k < t->tab[i]->nout; k++)
			if (t->tab[i]->out[k] == s) {
				st = t->tab[i];
				break;
			}
	FPREP__ASSERT(st != NULL);
	memmove(st->out + k, st->out + k + 1,
	        (st->nout - k - 1) * sizeof(*st->out));
	st->nout--;
	job->message[FPREP_MESSAGE_SIZE - 1] = '\0';
	if (job->status != FPREP_OK) {
		/* A stream whose decoder did not open is no stream. */
		if (s->kind == FPREP_KIND_STREAM_OPEN)
			st->closed = 1;
		fprep__answer_fail(s, job->status,
		                   job->message[0] != '\0'
		                           ? job->message
		                           : fprep_strerror(job->status));
	} else if (s->kind == FPREP_KIND_STREAM_OPEN) {
		st->opened = 1;
		fprep__answer_ok(s, st->id, "", NULL);
	} else {
		streams_reply(s);
	}
	streams_next(t, st);
}

void fprep__streams_drop_pipe(fprep__server *srv, uint32_t pipe)
{
	fprep__streams *t = &srv->streams;

	FPREP__LOOP_ONLY(srv);
	for (unsigned i = t->n; i-- > 0;) {
		fprep__stream *st = t->tab[i];

		if (st->pipe != pipe)
			continue;
		st->closed = 1;
		streams_next(t, st); /* fails the waiting, frees when idle */
	}
}

void fprep__streams_fini(fprep__server *srv)
{
	fprep__streams *t = &srv->streams;

	for (unsigned i = 0; i < t->n; i++) {
		if (t->tab[i]->video != NULL)
			t->tab[i]->video->ops->close(t->tab[i]->video);
		free(t->tab[i]->out);
		free(t->tab[i]->wait);
		free(t->tab[i]);
	}
	free(t->tab);
	memset(t, 0, sizeof(*t));
}
