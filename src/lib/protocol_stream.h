/*
 * protocol_stream.h: what protocol.c asks protocol_stream.c about the
 * stream messages. Private to src/lib.
 */
#ifndef FPREP_LIB_PROTOCOL_STREAM_H
#define FPREP_LIB_PROTOCOL_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "frameprep/frameprep.h"
#include "frameprep/protocol.h"

/* fprep__stream_open_check checks the fields of a decoded STREAM_OPEN r
 * that a FRAME does not have: a codec as src_format, no source size (the
 * bitstream gives it), inline input and output, a colour channel order,
 * parameter sets (input_size bytes, payload bytes received) within
 * lim->max_packet_bytes. On FPREP_OK it writes into *frame and *frame_lim
 * the FRAME of a small I420 source, and the limits, under which the caller
 * then checks the tensor's fields. Errors: FPREP_EINVAL, FPREP_ELIMIT,
 * FPREP_EPROTO, explained in msg (msg_size bytes). Any thread. */
int fprep__stream_open_check(const fprep_request *r, const fprep_limits *lim,
                             uint64_t payload, fprep_request *frame,
                             fprep_limits *frame_lim, char *msg,
                             size_t msg_size);

/* fprep__stream_reply_check checks a successful STREAM_PACKET or
 * STREAM_FLUSH reply's payload: the tensor (shape[0] frames, maybe none)
 * and one frame record per frame, inline. Returns FPREP_OK or
 * FPREP_EPROTO. Any thread. */
int fprep__stream_reply_check(const fprep_reply_header *rep);

#endif /* FPREP_LIB_PROTOCOL_STREAM_H */
