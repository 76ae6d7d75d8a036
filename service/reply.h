/*
 * reply.h: the pieces of reply messages (wire format in protocol.h):
 * tensor replies whose payload the backend writes in place, the headers
 * of tensor and other replies, the messages of text (INFO) and error
 * replies, and the write of a header into shared memory. Each reply's
 * header is encoded once, by fprep__answer_reply (daemon.h).
 */
#ifndef FPREP_SERVICE_REPLY_H
#define FPREP_SERVICE_REPLY_H

#include <nng/nng.h>
#include <stdint.h>

#include "backend.h"
#include "frameprep/protocol.h"

/* fprep__reply_tensor_alloc allocates a reply of FPREP_REPLY_HEADER_SIZE +
 * tensor_bytes and points *tensor at its payload, where the backend writes
 * the tensor. Returns 0 or FPREP_ENOMEM. */
int fprep__reply_tensor_alloc(nng_msg **msgp, uint64_t tensor_bytes,
                              uint8_t **tensor);

/* fprep__reply_header_tensor fills rep, the header of a successful tensor
 * reply for job: shape, transform, timings (t_queue_us, t_total_us
 * measured by the caller with fprep__reply_us) and job->message (the
 * --trace text, or empty). The payload after it holds the tensor (or
 * nothing, for a tensor in a region); a ROIS or BATCH's payload also has
 * its transform records after the tensor (slot.c writes them), and its
 * header's transform fields are zero. */
void fprep__reply_header_tensor(fprep_reply_header *rep, const fprep__job *job,
                                uint32_t t_queue_us, uint32_t t_total_us);

/* fprep__reply_us: the microseconds of a reply's t_total_us and
 * t_queue_us, from from_ns to to_ns (CLOCK_MONOTONIC): at least 1, since 0
 * in those fields means "not timed" (protocol.h: an error before the
 * backend has t_queue_us 0; every reply has t_total_us), so a span under a
 * microsecond (or a clock that went backwards) reads as 1; at most
 * UINT32_MAX. Any thread. */
uint32_t fprep__reply_us(uint64_t from_ns, uint64_t to_ns);

/* fprep__reply_header_simple fills rep, the header of a reply without a
 * tensor: status (enum fprep_err), message (cut to the field), text_len
 * bytes of text payload to follow, region_id (REGISTER, DOORBELL; else 0).
 */
void fprep__reply_header_simple(fprep_reply_header *rep, uint16_t kind,
                                uint64_t request_id, int status,
                                const char *message, uint64_t text_len,
                                uint32_t region_id);

/* fprep__reply_take makes the message of a reply without a tensor:
 * FPREP_REPLY_HEADER_SIZE bytes for the header, which the caller encodes
 * (fprep__answer_reply), then text (strlen bytes; NULL: none). spare, if
 * not NULL, is a message the caller gives up: reused when possible (a
 * spare of at least the size is cut to it without allocating, so an error
 * can be answered even when memory is short), else freed. Returns the
 * message, or NULL when out of memory. */
nng_msg *fprep__reply_take(nng_msg *spare, const char *text);

/* fprep__reply_write writes the reply header hdr at area, inside region r
 * (8-byte aligned, FPREP_REPLY_HEADER_SIZE bytes): the bytes other than
 * request_id, then request_id with a release store, then a futex wake on
 * it; the region's reply count goes up first (fprep__memreg.replies).
 * Returns 1, or 0 without writing when the SIGBUS guard caught the
 * region. Called while r is in use; any thread. */
int fprep__reply_write(fprep__memreg *r, uint8_t *area, const void *hdr);

#endif /* FPREP_SERVICE_REPLY_H */
