/*
 * reply.c: reply messages (see reply.h).
 *
 * A tensor reply is allocated before the work starts, header space first,
 * so the backend writes the tensor straight into the message that nng
 * sends: no copy of the tensor on the way out. Error replies reuse a
 * message that is no longer needed (the request, or a tensor reply that
 * failed) by trimming it to the header. The header is encoded into either
 * by the reply's one owner, fprep__answer_reply (answer.c).
 */
#include "reply.h"

#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "frameprep/protocol.h"

int fprep__reply_tensor_alloc(nng_msg **msgp, uint64_t tensor_bytes,
                              uint8_t **tensor)
{
	nng_msg *msg;

	if (tensor_bytes > SIZE_MAX - FPREP_REPLY_HEADER_SIZE)
		return FPREP_ENOMEM;
	if (nng_msg_alloc(&msg, FPREP_REPLY_HEADER_SIZE + tensor_bytes) != 0)
		return FPREP_ENOMEM;
	*tensor = (uint8_t *)nng_msg_body(msg) + FPREP_REPLY_HEADER_SIZE;
	*msgp = msg;
	return 0;
}

void fprep__reply_header_tensor(fprep_reply_header *rep, const fprep__job *job,
                                uint32_t t_queue_us, uint32_t t_total_us)
{
	const fprep_request *req = &job->req;

	memset(rep, 0, sizeof(*rep));
	rep->version = FPREP_PROTOCOL_VERSION;
	rep->kind = req->kind;
	rep->request_id = req->request_id;
	rep->status = FPREP_OK;
	rep->dtype = req->dtype;
	rep->layout = req->layout;
	rep->ndim = 4;
	rep->output_loc = req->output_loc;
	memcpy(rep->shape, job->shape, sizeof(rep->shape));
	rep->scale_x = job->xf.scale_x;
	rep->scale_y = job->xf.scale_y;
	rep->pad_x = (float)job->xf.pad_x;
	rep->pad_y = (float)job->xf.pad_y;
	rep->t_queue_us = t_queue_us;
	rep->t_compute_us = job->t_compute_us;
	rep->t_h2d_us = job->t_h2d_us;
	rep->t_kernel_us = job->t_kernel_us;
	rep->t_d2h_us = job->t_d2h_us;
	rep->t_total_us = t_total_us;
	rep->decoded_width = job->decoded_width;
	rep->decoded_height = job->decoded_height;
	rep->t_decode_us = job->t_decode_us;
	rep->payload_size =
	        req->output_loc == FPREP_LOC_INLINE ? job->output_size : 0;
	if (req->elements > 0) {
		/* ROIS, BATCH: a transform per element follows (slot.c). */
		rep->payload_size +=
		        (uint64_t)req->elements * FPREP_ELEMENT_XF_SIZE;
		rep->scale_x = rep->scale_y = rep->pad_x = rep->pad_y = 0.0f;
	}
	rep->tensor_size = job->output_size;
	if (req->input_loc != FPREP_LOC_INLINE)
		rep->flags |= FPREP_REPLY_F_INPUT_RELEASED;
	memcpy(rep->message, job->message,
	       strnlen(job->message, sizeof(rep->message) - 1));
}

uint32_t fprep__reply_us(uint64_t from_ns, uint64_t to_ns)
{
	uint64_t us = to_ns > from_ns ? (to_ns - from_ns) / 1000 : 0;

	return us == 0 ? 1 : us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

int fprep__reply_write(fprep__memreg *r, uint8_t *area, const void *hdr)
{
	const uint8_t *h = hdr;
	_Atomic uint64_t *id;
	uint64_t v;

	if (fprep__memreg_broken(r))
		return 0;
	memcpy(area, h, 8);
	memcpy(area + 16, h + 16, FPREP_REPLY_HEADER_SIZE - 16);
	atomic_fetch_add_explicit(&r->replies, 1, memory_order_release);
	memcpy(&v, h + 8, sizeof(v)); /* the wire's bytes, stored as one */
	id = (_Atomic uint64_t *)(void *)(area + 8);
	atomic_store_explicit(id, v, memory_order_release);
	syscall(SYS_futex, (uint32_t *)(void *)(area + 8), FUTEX_WAKE, INT_MAX,
	        NULL, NULL, 0);
	return 1;
}

/* reply_resize makes spare (or a new message) exactly size bytes long. */
static nng_msg *reply_resize(nng_msg *spare, size_t size)
{
	nng_msg *msg = NULL;

	if (spare != NULL) {
		size_t len = nng_msg_len(spare);

		if (len >= size && nng_msg_chop(spare, len - size) == 0)
			return spare;
		if (nng_msg_realloc(spare, size) == 0)
			return spare;
		nng_msg_free(spare);
	}
	if (nng_msg_alloc(&msg, size) != 0)
		return NULL;
	return msg;
}

void fprep__reply_header_simple(fprep_reply_header *rep, uint16_t kind,
                                uint64_t request_id, int status,
                                const char *message, uint64_t text_len,
                                uint32_t region_id)
{
	size_t mlen = strnlen(message, sizeof(rep->message) - 1);

	memset(rep, 0, sizeof(*rep));
	rep->version = FPREP_PROTOCOL_VERSION;
	rep->kind = kind;
	rep->request_id = request_id;
	rep->status = (uint32_t)status;
	rep->payload_size = text_len;
	rep->region_id = region_id;
	memcpy(rep->message, message, mlen); /* rep is zeroed: terminated */
}

nng_msg *fprep__reply_take(nng_msg *spare, const char *text)
{
	size_t tlen = text != NULL ? strlen(text) : 0;
	nng_msg *msg;

	msg = reply_resize(spare, FPREP_REPLY_HEADER_SIZE + tlen);
	if (msg == NULL)
		return NULL;
	if (tlen > 0)
		memcpy((char *)nng_msg_body(msg) + FPREP_REPLY_HEADER_SIZE,
		       text, tlen);
	return msg;
}
