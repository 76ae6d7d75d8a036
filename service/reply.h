/*
 * reply.h: building reply messages (wire format in protocol.h): tensor
 * replies whose payload the backend writes in place, text replies (INFO)
 * and error replies.
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
 * measured by the caller) and job->message (the --trace text, or empty).
 * fprep__reply_tensor_finish encodes it into msg, whose payload holds the
 * tensor (or which is the header alone, for a tensor in a region); a ROIS
 * or BATCH's payload also has its transform records after the tensor
 * (slot.c writes them), and its header's transform fields are zero. */
void fprep__reply_header_tensor(fprep_reply_header *rep, const fprep__job *job,
                                uint32_t t_queue_us, uint32_t t_total_us);
void fprep__reply_tensor_finish(nng_msg *msg, const fprep__job *job,
                                uint32_t t_queue_us, uint32_t t_total_us);

/* fprep__reply_header_simple fills rep, the header of a reply without a
 * tensor: status (enum fprep_err), message (cut to the field), text_len
 * bytes of text payload to follow, region_id (REGISTER, DOORBELL; else 0).
 */
void fprep__reply_header_simple(fprep_reply_header *rep, uint16_t kind,
                                uint64_t request_id, int status,
                                const char *message, uint64_t text_len,
                                uint32_t region_id);

/* fprep__reply_msg builds the message of a reply without a tensor: header
 * rep, then text (strlen bytes, as rep->payload_size says; NULL: none).
 * spare as in fprep__reply_text. Returns the message, or NULL when out of
 * memory. */
nng_msg *fprep__reply_msg(nng_msg *spare, const fprep_reply_header *rep,
                          const char *text);

/* fprep__reply_write writes the reply header hdr at area, inside region r
 * (8-byte aligned, FPREP_REPLY_HEADER_SIZE bytes): the bytes other than
 * request_id, then request_id with a release store, then a futex wake on
 * it; the region's reply count goes up first (fprep__memreg.replies).
 * Returns 1, or 0 without writing when the SIGBUS guard caught the
 * region. Called while r is in use; any thread. */
int fprep__reply_write(fprep__memreg *r, uint8_t *area, const void *hdr);

/* fprep__reply_text builds an OK reply whose payload is text (strlen
 * bytes). spare, if not NULL, is a message the caller gives up (reused when
 * possible, else freed). Returns the reply, or NULL when out of memory. */
nng_msg *fprep__reply_text(nng_msg *spare, uint16_t kind, uint64_t request_id,
                           const char *text);

/* fprep__reply_error builds an error reply: status (enum fprep_err) and
 * message, which names the field, the value and the limit. spare as in
 * fprep__reply_text; a spare of at least FPREP_REPLY_HEADER_SIZE bytes is
 * reused without allocating, so an error can be answered even when memory
 * is short. Returns the reply or NULL. */
nng_msg *fprep__reply_error(nng_msg *spare, uint16_t kind, uint64_t request_id,
                            int status, const char *message);

/* fprep__reply_region builds the OK reply to a REGISTER or REGISTER_CUDA
 * (kind): region_id and a message. spare as in fprep__reply_text. Returns
 * the reply or NULL. */
nng_msg *fprep__reply_region(nng_msg *spare, uint16_t kind, uint64_t request_id,
                             uint32_t region_id, const char *message);

#endif /* FPREP_SERVICE_REPLY_H */
