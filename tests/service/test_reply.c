/*
 * test_reply.c: the daemon's reply pieces (service/reply.c), put together
 * as the reply's one owner does (fprep__answer_reply, answer.c: a header
 * from fprep__reply_header_tensor or _simple, timed with fprep__reply_us,
 * encoded into the message from fprep__reply_tensor_alloc or
 * fprep__reply_take). Each reply is decoded back with the public decoder,
 * so builder and wire spec agree on every field; error replies reuse a
 * spare message without allocating, messages longer than the header's
 * field are cut, never overflowed, and a timed span is never 0.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cmocka_main.h"
#include <nng/nng.h>

#include "frameprep/frameprep.h"
#include "reply.h"

/* finish encodes rep into msg's header space, as fprep__answer_reply does. */
static void finish(nng_msg *msg, const fprep_reply_header *rep)
{
	fprep_reply_encode(rep, nng_msg_body(msg));
}

/* simple makes the reply without a tensor that answer.c makes: spare
 * reused, text after the header. */
static nng_msg *simple(nng_msg *spare, uint16_t kind, uint64_t id, int status,
                       const char *message, const char *text,
                       uint32_t region_id)
{
	fprep_reply_header rep;
	nng_msg *msg;

	fprep__reply_header_simple(&rep, kind, id, status, message,
	                           text != NULL ? strlen(text) : 0, region_id);
	msg = fprep__reply_take(spare, text);
	if (msg != NULL)
		finish(msg, &rep);
	return msg;
}

/* tensor_finish encodes job's tensor header into msg, with the spans
 * fprep__reply_us gives from the receipt at 0 ns. */
static void tensor_finish(nng_msg *msg, const fprep__job *job,
                          uint64_t start_ns, uint64_t now_ns)
{
	fprep_reply_header rep;

	fprep__reply_header_tensor(&rep, job, fprep__reply_us(0, start_ns),
	                           fprep__reply_us(0, now_ns));
	finish(msg, &rep);
}

/* reply_decode decodes msg's header and checks the common fields. */
static void reply_decode(nng_msg *msg, uint16_t kind, uint64_t id,
                         uint32_t status, fprep_reply_header *rep)
{
	assert_non_null(msg);
	assert_int_equal(
	        fprep_reply_decode(nng_msg_body(msg), nng_msg_len(msg), rep),
	        FPREP_OK);
	assert_int_equal(rep->version, FPREP_PROTOCOL_VERSION);
	assert_int_equal(rep->kind, kind);
	assert_true(rep->request_id == id);
	assert_int_equal(rep->status, status);
}

/* A FRAME job: 640x480 BGR8 to a 320x320 letterbox. */
static void reply_job(fprep__job *job, uint16_t dtype, uint16_t layout)
{
	uint64_t bytes = 0;
	uint32_t shape[4];

	memset(job, 0, sizeof(*job));
	fprep_request_init(&job->req, FPREP_PIX_BGR8, 640, 480);
	job->req.request_id = UINT64_C(0x123456789abc);
	job->req.out_width = 320;
	job->req.out_height = 320;
	job->req.dtype = dtype;
	job->req.layout = layout;
	assert_int_equal(fprep_tensor_shape(&job->req, shape, &bytes), 0);
	assert_int_equal(fprep__job_plan(job), 0);
	assert_memory_equal(job->shape, shape, sizeof(shape));
	assert_true(job->output_size == bytes);
	job->t_compute_us = 11;
	job->t_h2d_us = 22;
	job->t_kernel_us = 33;
	job->t_d2h_us = 44;
}

static void tensor_inline(void **state)
{
	static const struct {
		uint16_t dtype, layout;
		uint32_t elem;
	} cases[] = {
	        {FPREP_DTYPE_F32, FPREP_LAYOUT_NCHW, 4},
	        {FPREP_DTYPE_F16, FPREP_LAYOUT_NHWC, 2},
	        {FPREP_DTYPE_U8, FPREP_LAYOUT_NCHW, 1},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		fprep_reply_header rep;
		fprep__job job;
		nng_msg *msg = NULL;
		uint8_t *tensor = NULL;

		reply_job(&job, cases[i].dtype, cases[i].layout);
		if (cases[i].dtype == FPREP_DTYPE_U8) {
			job.req.scale = 1.0f;
			fprep_transform_compute(&job.req, &job.xf);
		}
		assert_int_equal(job.output_size,
		                 320u * 320u * 3u * cases[i].elem);
		assert_int_equal(fprep__reply_tensor_alloc(
		                         &msg, job.output_size, &tensor),
		                 0);
		assert_int_equal(nng_msg_len(msg),
		                 FPREP_REPLY_HEADER_SIZE + job.output_size);
		assert_ptr_equal(tensor, (uint8_t *)nng_msg_body(msg) +
		                                 FPREP_REPLY_HEADER_SIZE);
		memset(tensor, 0x5a, job.output_size);
		tensor_finish(msg, &job, 7999, 1000000);

		reply_decode(msg, FPREP_KIND_FRAME, job.req.request_id,
		             FPREP_OK, &rep);
		assert_int_equal(rep.dtype, cases[i].dtype);
		assert_int_equal(rep.layout, cases[i].layout);
		assert_int_equal(rep.ndim, 4);
		assert_int_equal(rep.output_loc, FPREP_LOC_INLINE);
		assert_int_equal(rep.shape[0], 1);
		if (cases[i].layout == FPREP_LAYOUT_NCHW) {
			assert_int_equal(rep.shape[1], 3);
			assert_int_equal(rep.shape[3], 320);
		} else {
			assert_int_equal(rep.shape[1], 320);
			assert_int_equal(rep.shape[3], 3);
		}
		assert_int_equal(rep.shape[2], 320);
		/* 640x480 into 320x320: scale 0.5, 40 rows above. */
		assert_true(rep.scale_x == 0.5f && rep.scale_y == 0.5f);
		assert_true(rep.pad_x == 0.0f && rep.pad_y == 40.0f);
		assert_true(rep.scale_x == job.xf.scale_x);
		assert_true(rep.pad_y == (float)job.xf.pad_y);
		assert_int_equal(rep.t_queue_us, 7);
		assert_int_equal(rep.t_compute_us, 11);
		assert_int_equal(rep.t_h2d_us, 22);
		assert_int_equal(rep.t_kernel_us, 33);
		assert_int_equal(rep.t_d2h_us, 44);
		assert_int_equal(rep.t_total_us, 1000);
		assert_true(rep.payload_size == job.output_size);
		assert_true(rep.tensor_size == job.output_size);
		assert_int_equal(rep.region_id, 0);
		assert_int_equal(rep.flags, 0);
		assert_string_equal(rep.message, "");
		/* The header did not touch the tensor. */
		assert_int_equal(tensor[0], 0x5a);
		assert_int_equal(tensor[job.output_size - 1], 0x5a);
		nng_msg_free(msg);
	}
}

/* Shared-memory (and CUDA) output: the reply is the header alone,
 * payload_size 0. */
static void tensor_shm(void **state)
{
	fprep_reply_header rep;
	fprep__job job;
	nng_msg *msg = NULL;
	uint8_t *tensor = NULL;

	(void)state;
	reply_job(&job, FPREP_DTYPE_F32, FPREP_LAYOUT_NCHW);
	job.req.input_loc = FPREP_LOC_SHM;
	job.req.output_loc = FPREP_LOC_SHM;
	assert_int_equal(fprep__reply_tensor_alloc(&msg, 0, &tensor), 0);
	assert_int_equal(nng_msg_len(msg), FPREP_REPLY_HEADER_SIZE);
	tensor_finish(msg, &job, 1000, 2000);
	reply_decode(msg, FPREP_KIND_FRAME, job.req.request_id, FPREP_OK, &rep);
	assert_int_equal(rep.output_loc, FPREP_LOC_SHM);
	assert_true(rep.payload_size == 0);
	assert_true(rep.tensor_size == job.output_size);
	assert_int_equal(rep.flags, FPREP_REPLY_F_INPUT_RELEASED);
	nng_msg_free(msg);

	/* CUDA input and output: the same, the input released as well. */
	job.req.input_loc = FPREP_LOC_CUDA;
	job.req.output_loc = FPREP_LOC_CUDA;
	msg = NULL;
	assert_int_equal(fprep__reply_tensor_alloc(&msg, 0, &tensor), 0);
	tensor_finish(msg, &job, 1000, 2000);
	reply_decode(msg, FPREP_KIND_FRAME, job.req.request_id, FPREP_OK, &rep);
	assert_int_equal(rep.output_loc, FPREP_LOC_CUDA);
	assert_true(rep.payload_size == 0);
	assert_int_equal(rep.flags, FPREP_REPLY_F_INPUT_RELEASED);
	nng_msg_free(msg);
}

static void tensor_too_large(void **state)
{
	nng_msg *msg = NULL;
	uint8_t *tensor = NULL;

	(void)state;
	assert_int_equal(fprep__reply_tensor_alloc(&msg, UINT64_MAX, &tensor),
	                 FPREP_ENOMEM);
	assert_null(msg);
	assert_null(tensor);
}

static void text(void **state)
{
	static const char info[] = "version: test\nbackend: cpu\n";
	fprep_reply_header rep;
	nng_msg *msg, *spare;

	(void)state;
	msg = simple(NULL, FPREP_KIND_INFO, 9, FPREP_OK, "", info, 0);
	reply_decode(msg, FPREP_KIND_INFO, 9, FPREP_OK, &rep);
	assert_true(rep.payload_size == strlen(info));
	assert_int_equal(nng_msg_len(msg),
	                 FPREP_REPLY_HEADER_SIZE + strlen(info));
	assert_memory_equal((char *)nng_msg_body(msg) + FPREP_REPLY_HEADER_SIZE,
	                    info, strlen(info));
	assert_string_equal(rep.message, "");

	/* A spare longer than the reply shrinks to it; a shorter one grows. */
	msg = simple(msg, FPREP_KIND_INFO, 10, FPREP_OK, "", "", 0);
	assert_int_equal(nng_msg_len(msg), FPREP_REPLY_HEADER_SIZE);
	reply_decode(msg, FPREP_KIND_INFO, 10, FPREP_OK, &rep);
	assert_true(rep.payload_size == 0);
	nng_msg_free(msg);
	assert_int_equal(nng_msg_alloc(&spare, 10), 0);
	msg = simple(spare, FPREP_KIND_INFO, 11, FPREP_OK, "", info, 0);
	assert_ptr_equal(msg, spare);
	reply_decode(msg, FPREP_KIND_INFO, 11, FPREP_OK, &rep);
	assert_true(rep.payload_size == strlen(info));
	nng_msg_free(msg);
}

static void error_reuses_spare(void **state)
{
	fprep_reply_header rep;
	nng_msg *spare, *msg;

	(void)state;
	/* A spent request of header plus payload: trimmed to the header. */
	assert_int_equal(
	        nng_msg_alloc(&spare, FPREP_REQUEST_HEADER_SIZE + 100000), 0);
	memset(nng_msg_body(spare), 0xff, nng_msg_len(spare));
	msg = simple(spare, FPREP_KIND_FRAME, 42, FPREP_ELIMIT,
	             "out_width 9999 exceeds max_out_width 2048", NULL, 0);
	assert_ptr_equal(msg, spare);
	assert_int_equal(nng_msg_len(msg), FPREP_REPLY_HEADER_SIZE);
	reply_decode(msg, FPREP_KIND_FRAME, 42, FPREP_ELIMIT, &rep);
	assert_string_equal(rep.message,
	                    "out_width 9999 exceeds max_out_width 2048");
	assert_true(rep.payload_size == 0 && rep.tensor_size == 0);
	assert_int_equal(rep.ndim, 0);
	assert_int_equal(rep.region_id, 0);
	assert_int_equal(rep.flags, 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(rep.shape[i], 0);

	/* Exactly a header long (a failed tensor reply of 0 bytes). */
	msg = simple(msg, FPREP_KIND_ECHO, 43, FPREP_ESHUTDOWN, "shutting down",
	             NULL, 0);
	assert_ptr_equal(msg, spare);
	reply_decode(msg, FPREP_KIND_ECHO, 43, FPREP_ESHUTDOWN, &rep);
	assert_string_equal(rep.message, "shutting down");
	nng_msg_free(msg);

	/* No spare: a new message. */
	msg = simple(NULL, FPREP_KIND_FRAME, 44, FPREP_EPROTO, "bad magic",
	             NULL, 0);
	reply_decode(msg, FPREP_KIND_FRAME, 44, FPREP_EPROTO, &rep);
	assert_string_equal(rep.message, "bad magic");
	nng_msg_free(msg);
}

static void region(void **state)
{
	fprep_reply_header rep;
	nng_msg *spare, *msg;

	(void)state;
	assert_int_equal(nng_msg_alloc(&spare, FPREP_REQUEST_HEADER_SIZE), 0);
	msg = simple(spare, FPREP_KIND_REGISTER, 77, FPREP_OK,
	             "region 5: /fprep-x, 4096 bytes", NULL, 5);
	assert_ptr_equal(msg, spare);
	reply_decode(msg, FPREP_KIND_REGISTER, 77, FPREP_OK, &rep);
	assert_int_equal(rep.region_id, 5);
	assert_true(rep.payload_size == 0);
	assert_string_equal(rep.message, "region 5: /fprep-x, 4096 bytes");
	nng_msg_free(msg);
}

/* A message longer than the field is cut to FPREP_MESSAGE_SIZE - 1 bytes
 * and stays terminated; nothing is written past the header. */
static void message_truncated(void **state)
{
	char big[3 * FPREP_MESSAGE_SIZE];
	fprep_reply_header rep;
	nng_msg *msg;

	(void)state;
	for (size_t i = 0; i < sizeof(big) - 1; i++)
		big[i] = (char)('a' + i % 26);
	big[sizeof(big) - 1] = '\0';

	msg = simple(NULL, FPREP_KIND_FRAME, 1, FPREP_EINVAL, big, NULL, 0);
	assert_int_equal(nng_msg_len(msg), FPREP_REPLY_HEADER_SIZE);
	reply_decode(msg, FPREP_KIND_FRAME, 1, FPREP_EINVAL, &rep);
	assert_int_equal(strlen(rep.message), FPREP_MESSAGE_SIZE - 1);
	assert_memory_equal(rep.message, big, FPREP_MESSAGE_SIZE - 1);
	nng_msg_free(msg);

	/* Exactly the field's capacity, and one more. */
	big[FPREP_MESSAGE_SIZE - 1] = '\0';
	msg = simple(NULL, FPREP_KIND_REGISTER, 2, FPREP_OK, big, NULL, 3);
	reply_decode(msg, FPREP_KIND_REGISTER, 2, FPREP_OK, &rep);
	assert_string_equal(rep.message, big);
	nng_msg_free(msg);
	big[FPREP_MESSAGE_SIZE - 1] = 'x';
	big[FPREP_MESSAGE_SIZE] = '\0';
	msg = simple(NULL, FPREP_KIND_REGISTER, 2, FPREP_OK, big, NULL, 3);
	reply_decode(msg, FPREP_KIND_REGISTER, 2, FPREP_OK, &rep);
	assert_int_equal(strlen(rep.message), FPREP_MESSAGE_SIZE - 1);
	nng_msg_free(msg);
}

/* The one converter of a reply's spans: whole microseconds, never 0 (0
 * means "not timed"), capped at UINT32_MAX. */
static void span_us(void **state)
{
	(void)state;
	assert_int_equal(fprep__reply_us(1000, 1000), 1);
	assert_int_equal(fprep__reply_us(1000, 1999), 1);
	assert_int_equal(fprep__reply_us(5000, 1000), 1); /* backwards */
	assert_int_equal(fprep__reply_us(1000, 3999), 2);
	assert_int_equal(fprep__reply_us(0, UINT64_C(5000000000)), 5000000);
	assert_int_equal(fprep__reply_us(0, UINT64_MAX), UINT32_MAX);
}

CMOCKA_MAIN({
        cmocka_unit_test(tensor_inline),
        cmocka_unit_test(tensor_shm),
        cmocka_unit_test(tensor_too_large),
        cmocka_unit_test(text),
        cmocka_unit_test(error_reuses_spare),
        cmocka_unit_test(region),
        cmocka_unit_test(message_truncated),
        cmocka_unit_test(span_us),
})
