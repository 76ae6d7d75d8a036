/*
 * streams.h: frameprepd's video streams (protocol.h, "Video streams"):
 * the table of open streams, each owned by the connection that opened it,
 * and the order of each stream's requests. Loop thread only.
 */
#ifndef FPREP_SERVICE_STREAMS_H
#define FPREP_SERVICE_STREAMS_H

#include <stdint.h>

#include "frameprep/protocol.h"

typedef struct fprep__server fprep__server;
typedef struct fprep__slot fprep__slot;
typedef struct fprep__stream fprep__stream;

/* fprep__streams: the open streams. [L] */
typedef struct fprep__streams {
	fprep__stream **tab; /* n open streams, in no order */
	unsigned n;
	unsigned cap;
	uint32_t next_id; /* the next stream's id; never 0 */
} fprep__streams;

/* fprep__streams_take serves s's STREAM_* request req (admitted and
 * validated; counted in flight): STREAM_OPEN opens a stream, the others
 * wait behind the requests of their stream that came before, then run
 * (a job: the decoder's open, a packet, a flush) or close it. Every
 * request gets one reply. */
void fprep__streams_take(fprep__slot *s, const fprep_request *req);
/* fprep__streams_refuse takes s, a request refused before its turn (its
 * header or limits checked: status and why), when it is a numbered
 * request of an open stream (seq, protocol.h): it is answered so in its
 * turn, so that the stream's later requests do not wait for it. Returns 1
 * when it took s, else 0 (the caller answers it). */
int fprep__streams_refuse(fprep__slot *s, int status, const char *why);
/* fprep__streams_done handles the FPREP__EV_DONE event of s, whose stream
 * job ended: answers it and starts the stream's next request. */
void fprep__streams_done(fprep__slot *s);
/* fprep__streams_drop_pipe closes the streams of connection pipe: their
 * waiting requests are answered FPREP_ECLOSED, a job in flight ends first
 * (then the stream goes). */
void fprep__streams_drop_pipe(fprep__server *srv, uint32_t pipe);
/* fprep__streams_fini frees every stream, once the backend is closed. */
void fprep__streams_fini(fprep__server *srv);

#endif /* FPREP_SERVICE_STREAMS_H */
