/*
 * _native.c: frameprep._native, the CPython binding of libframeprep.
 *
 * The design is simple: the Python package keeps what is Pythonic (numpy
 * views, asyncio, exceptions, options) and this module hands everything
 * else to the C library: the wire codec, the client (its sockets, call
 * slots, stages, replies in shared memory) and its rings (frameprep/ring.h).
 * It is written against the limited API of Python 3.10 (abi3), so one
 * binary serves every later version. Py_buffer is not in that API before
 * 3.11, so memory comes in as the object that owns it (bytes, a numpy
 * array read through numpy's stable array struct, a ring) and its
 * address and length are found here, never taken as ints from Python:
 * every length, offset and slot that the caller gives is checked against
 * that object (native_bytes_of; a ring's slots and layout by CRing, its
 * frame offsets by fprep_ring_send) before memory is read or viewed. Device
 * pointers are only ever handed to the CUDA driver, which says whether they are
 * device memory (cuda_ptr.c).
 *
 * Every blocking call releases the GIL. Errors become the exceptions of
 * frameprep.errors through the factory the package registers at import
 * (set_error_factory): factory(code, text) returns the exception object.
 *
 * Objects:
 *   Client    an fprep_client. close() waits for the calls in progress on
 *             other threads (each ends within the client's timeout), then
 *             closes it.
 *   Request   an fprep_request (or fprep_register_request, by kind) made
 *             once from a dict of fields: the template of many requests.
 *   Result    an fprep_result: the reply header, its status and message,
 *             and an __array_interface__ over the payload it owns, so a
 *             numpy array views the tensor and keeps the result alive.
 *   Pending   an fprep_pending (fprep_client_submit): its done callback
 *             calls a Python callable with the GIL held.
 *   Gate      an fprep_gate (frameprep/ring.h): a connection's cap on
 *             requests in flight.
 *   CRing     a ring of frameprep/ring.h (fprep_ring): its leases, the
 *             send of a slot's request, re-registration; whole frames
 *             in one call.
 *   Hold      what holds a ring's slot (a reserved frame, a result).
 *   RingCore, RingResultCore  the C bases of ring.Ring and RingResult.
 *
 * Files, one a type (what they share in _native.h, which includes only
 * the public headers of libframeprep): this one (the module, the field
 * tables, the codec), _native_result.c (Request, Result, numpy arrays),
 * _native_client.c (Client, Pending), _native_gate.c (Client's methods,
 * Gate), _native_ring.c (CRing), _native_hold.c (Hold, CRing's slots)
 * and _native_ring_core.c (RingCore, RingResultCore).
 */
#include "_native.h"

PyObject *native_factory; /* frameprep.errors' error_for_status */

/* native_raise sets the exception of err with text, through the factory
 * when it is set, else a RuntimeError. Returns NULL. */
PyObject *native_raise(int err, const char *text)
{
	PyObject *exc;

	if (native_factory == NULL) {
		PyErr_Format(PyExc_RuntimeError, "%s: %s", fprep_err_name(err),
		             text);
		return NULL;
	}
	exc = PyObject_CallFunction(
	        native_factory, "is", err,
	        text != NULL && *text ? text : fprep_strerror(err));
	if (exc == NULL)
		return NULL;
	PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
	Py_DECREF(exc);
	return NULL;
}

static PyObject *native_set_error_factory(PyObject *self, PyObject *fn)
{
	(void)self;
	PyObject *old = native_factory;

	Py_XINCREF(fn);
	native_factory = fn;
	Py_XDECREF(old);
	Py_RETURN_NONE;
}

#define RQ(name, type)                                                         \
	{                                                                      \
#name, type, offsetof(fprep_request, name), 0                  \
	}
const struct native_field native_request_fields[] = {
        RQ(version, F_U16),      RQ(kind, F_U16),       RQ(request_id, F_U64),
        RQ(src_format, F_U16),   RQ(yuv_matrix, F_U8),  RQ(yuv_range, F_U8),
        RQ(src_width, F_U32),    RQ(src_height, F_U32), RQ(src_stride, F_U32),
        RQ(out_width, F_U32),    RQ(out_height, F_U32), RQ(resize, F_U8),
        RQ(channel_order, F_U8), RQ(dtype, F_U8),       RQ(layout, F_U8),
        RQ(pad_value, F_F32),    RQ(scale, F_F32),      RQ(mean, F_F32X3),
        RQ(std, F_F32X3),        RQ(input_loc, F_U8),   RQ(output_loc, F_U8),
        RQ(uv_stride, F_U16),    RQ(in_region, F_U32),  RQ(out_region, F_U32),
        RQ(in_offset, F_U64),    RQ(out_offset, F_U64), RQ(out_capacity, F_U64),
        RQ(input_size, F_U64),   RQ(u_offset, F_U32),   RQ(v_offset, F_U32),
        RQ(shm_reply, F_U8),     RQ(rounding, F_U8),    {NULL, 0, 0, 0}};
#undef RQ

#define RG(name, type, size)                                                   \
	{                                                                      \
#name, type, offsetof(fprep_register_request, name), size      \
	}
const struct native_field native_register_fields[] = {
        RG(version, F_U16, 0),
        RG(kind, F_U16, 0),
        RG(request_id, F_U64, 0),
        RG(region_size, F_U64, 0),
        RG(region_id, F_U32, 0),
        RG(doorbell_entries, F_U32, 0),
        RG(doorbell_offset, F_U64, 0),
        RG(region_name, F_STR, FPREP_REGION_NAME_MAX + 1),
        RG(cuda_offset, F_U64, 0),
        RG(cuda_handle, F_BYTES, FPREP_CUDA_HANDLE_SIZE),
        RG(cuda_uuid, F_BYTES, FPREP_CUDA_UUID_SIZE),
        {NULL, 0, 0, 0}};
#undef RG

#define RP(name, type, size)                                                   \
	{                                                                      \
#name, type, offsetof(fprep_reply_header, name), size          \
	}
const struct native_field native_reply_fields[] = {
        RP(version, F_U16, 0),       RP(kind, F_U16, 0),
        RP(request_id, F_U64, 0),    RP(status, F_U32, 0),
        RP(dtype, F_U8, 0),          RP(layout, F_U8, 0),
        RP(ndim, F_U8, 0),           RP(output_loc, F_U8, 0),
        RP(shape, F_U32X4, 0),       RP(scale_x, F_F32, 0),
        RP(scale_y, F_F32, 0),       RP(pad_x, F_F32, 0),
        RP(pad_y, F_F32, 0),         RP(t_queue_us, F_U32, 0),
        RP(t_compute_us, F_U32, 0),  RP(t_h2d_us, F_U32, 0),
        RP(t_kernel_us, F_U32, 0),   RP(t_d2h_us, F_U32, 0),
        RP(t_total_us, F_U32, 0),    RP(payload_size, F_U64, 0),
        RP(tensor_size, F_U64, 0),   RP(region_id, F_U32, 0),
        RP(flags, F_U32, 0),         RP(message, F_STR, FPREP_MESSAGE_SIZE),
        RP(decoded_width, F_U16, 0), RP(decoded_height, F_U16, 0),
        RP(t_decode_us, F_U32, 0),   {NULL, 0, 0, 0}};
#undef RP

/* native_get_uint reads an int of at most max from v. */
static int native_get_uint(PyObject *v, uint64_t max, const char *name,
                           uint64_t *out)
{
	unsigned long long x = PyLong_AsUnsignedLongLong(v);

	if (x == (unsigned long long)-1 && PyErr_Occurred()) {
		PyErr_Clear();
		PyErr_Format(PyExc_OverflowError,
		             "field %s: %R is not an integer in 0..%llu", name,
		             v, (unsigned long long)max);
		return -1;
	}
	if (x > max) {
		PyErr_Format(PyExc_OverflowError,
		             "field %s: %llu is larger than %llu", name, x,
		             (unsigned long long)max);
		return -1;
	}
	*out = x;
	return 0;
}

static int native_set_field(void *base, const struct native_field *f,
                            PyObject *v)
{
	uint8_t *p = (uint8_t *)base + f->offset;
	uint64_t x = 0;
	double d;

	switch (f->type) {
	case F_U8:
	case F_U16:
	case F_U32:
	case F_U64: {
		static const uint64_t max[] = {UINT8_MAX, UINT16_MAX,
		                               UINT32_MAX, UINT64_MAX};
		static const size_t size[] = {1, 2, 4, 8};

		if (native_get_uint(v, max[f->type], f->name, &x))
			return -1;
		if (f->type == F_U8) {
			uint8_t y = (uint8_t)x;
			memcpy(p, &y, 1);
		} else if (f->type == F_U16) {
			uint16_t y = (uint16_t)x;
			memcpy(p, &y, 2);
		} else if (f->type == F_U32) {
			uint32_t y = (uint32_t)x;
			memcpy(p, &y, 4);
		} else {
			memcpy(p, &x, size[3]);
		}
		return 0;
	}
	case F_F32:
		d = PyFloat_AsDouble(v);
		if (d == -1.0 && PyErr_Occurred())
			return -1;
		*(float *)(void *)p = (float)d;
		return 0;
	case F_F32X3:
	case F_U32X4: {
		Py_ssize_t n = f->type == F_F32X3 ? 3 : 4;
		PyObject *seq = PySequence_Fast(v, f->name);

		if (seq == NULL)
			return -1;
		if (PySequence_Size(seq) != n) {
			Py_DECREF(seq);
			PyErr_Format(PyExc_ValueError,
			             "field %s needs %zd values", f->name, n);
			return -1;
		}
		for (Py_ssize_t i = 0; i < n; i++) {
			PyObject *e = PySequence_GetItem(seq, i);
			int bad;

			if (e == NULL) {
				Py_DECREF(seq);
				return -1;
			}
			if (f->type == F_F32X3) {
				d = PyFloat_AsDouble(e);
				bad = d == -1.0 && PyErr_Occurred();
				((float *)(void *)p)[i] = (float)d;
			} else {
				bad = native_get_uint(e, UINT32_MAX, f->name,
				                      &x) != 0;
				((uint32_t *)(void *)p)[i] = (uint32_t)x;
			}
			Py_DECREF(e);
			if (bad) {
				Py_DECREF(seq);
				return -1;
			}
		}
		Py_DECREF(seq);
		return 0;
	}
	case F_STR: {
		Py_ssize_t n;
		const char *s = PyUnicode_AsUTF8AndSize(v, &n);

		if (s == NULL)
			return -1;
		memset(p, 0, f->size);
		memcpy(p, s, (size_t)n < f->size - 1 ? (size_t)n : f->size - 1);
		return 0;
	}
	case F_BYTES: {
		char *s;
		Py_ssize_t n;

		if (PyBytes_AsStringAndSize(v, &s, &n))
			return -1;
		if ((size_t)n != f->size) {
			PyErr_Format(PyExc_ValueError,
			             "field %s must be %zu bytes, not %zd",
			             f->name, f->size, n);
			return -1;
		}
		memcpy(p, s, f->size);
		return 0;
	}
	}
	return -1;
}

static PyObject *native_get_field(const void *base,
                                  const struct native_field *f)
{
	const uint8_t *p = (const uint8_t *)base + f->offset;

	switch (f->type) {
	case F_U8:
		return PyLong_FromUnsignedLong(*p);
	case F_U16:
		return PyLong_FromUnsignedLong(*(const uint16_t *)(void *)p);
	case F_U32:
		return PyLong_FromUnsignedLong(*(const uint32_t *)(void *)p);
	case F_U64:
		return PyLong_FromUnsignedLongLong(
		        *(const uint64_t *)(void *)p);
	case F_F32:
		return PyFloat_FromDouble(*(const float *)(void *)p);
	case F_F32X3: {
		const float *v = (const float *)(const void *)p;
		return Py_BuildValue("(ddd)", (double)v[0], (double)v[1],
		                     (double)v[2]);
	}
	case F_U32X4: {
		const uint32_t *v = (const uint32_t *)(const void *)p;
		return Py_BuildValue("(kkkk)", (unsigned long)v[0],
		                     (unsigned long)v[1], (unsigned long)v[2],
		                     (unsigned long)v[3]);
	}
	case F_STR:
		return PyUnicode_DecodeUTF8(
		        (const char *)p,
		        (Py_ssize_t)strnlen((const char *)p, f->size),
		        "replace");
	case F_BYTES:
		return PyBytes_FromStringAndSize((const char *)p,
		                                 (Py_ssize_t)f->size);
	}
	Py_RETURN_NONE;
}

/* native_from_dict sets the fields of the struct at base that dict d
 * names; a key that is no field is an error. */
int native_from_dict(void *base, const struct native_field *fields, PyObject *d,
                     const char *what)
{
	PyObject *key, *value;
	Py_ssize_t pos = 0;

	if (!PyDict_Check(d)) {
		PyErr_SetString(PyExc_TypeError, "fields must be a dict");
		return -1;
	}
	while (PyDict_Next(d, &pos, &key, &value)) {
		const char *name = PyUnicode_AsUTF8AndSize(key, NULL);
		const struct native_field *f;

		if (name == NULL)
			return -1;
		for (f = fields; f->name != NULL; f++)
			if (strcmp(f->name, name) == 0)
				break;
		if (f->name == NULL) {
			PyErr_Format(PyExc_KeyError, "%s has no field %s", what,
			             name);
			return -1;
		}
		if (native_set_field(base, f, value))
			return -1;
	}
	return 0;
}

PyObject *native_to_dict(const void *base, const struct native_field *fields)
{
	PyObject *d = PyDict_New();

	if (d == NULL)
		return NULL;
	for (const struct native_field *f = fields; f->name != NULL; f++) {
		PyObject *v = native_get_field(base, f);

		if (v == NULL || PyDict_SetItemString(d, f->name, v)) {
			Py_XDECREF(v);
			Py_DECREF(d);
			return NULL;
		}
		Py_DECREF(v);
	}
	return d;
}

int native_is_register(unsigned kind)
{
	return kind == FPREP_KIND_REGISTER || kind == FPREP_KIND_UNREGISTER ||
	       kind == FPREP_KIND_REGISTER_CUDA || kind == FPREP_KIND_DOORBELL;
}

/* native_kind_of reads the "kind" of a fields dict (FRAME if absent). */
int native_kind_of(PyObject *d, unsigned *kind)
{
	PyObject *v = PyDict_Check(d) ? PyDict_GetItemString(d, "kind") : NULL;
	uint64_t x = FPREP_KIND_FRAME;

	if (v != NULL && native_get_uint(v, UINT16_MAX, "kind", &x))
		return -1;
	*kind = (unsigned)x;
	return 0;
}

/* ---- Module functions: the codec and the constants ---- */

static PyObject *native_decode_reply(PyObject *self, PyObject *arg)
{
	fprep_reply_header h;
	char *buf;
	Py_ssize_t n;
	int err;

	(void)self;
	if (PyBytes_AsStringAndSize(arg, &buf, &n))
		return NULL;
	memset(&h, 0, sizeof(h));
	if ((err = fprep_reply_decode(buf, (size_t)n, &h)) != 0)
		return native_raise(err,
		                    "fprep_reply_decode refused the reply");
	return native_to_dict(&h, native_reply_fields);
}

static PyObject *native_encode_reply(PyObject *self, PyObject *d)
{
	fprep_reply_header h;
	uint8_t buf[FPREP_REPLY_HEADER_SIZE];

	(void)self;
	memset(&h, 0, sizeof(h));
	if (native_from_dict(&h, native_reply_fields, d, "a reply"))
		return NULL;
	fprep_reply_encode(&h, buf);
	return PyBytes_FromStringAndSize((const char *)buf, sizeof(buf));
}

static PyObject *native_decode_request(PyObject *self, PyObject *arg)
{
	fprep_limits lim;
	fprep_register_request reg;
	fprep_request req;
	char msg[FPREP_MESSAGE_SIZE];
	char *buf;
	Py_ssize_t n;
	int err;

	(void)self;
	if (PyBytes_AsStringAndSize(arg, &buf, &n))
		return NULL;
	/* No limits: the daemon's are not this codec's to apply. */
	memset(&lim, 0xff, sizeof(lim));
	memset(&req, 0, sizeof(req));
	msg[0] = '\0';
	err = fprep_request_decode(buf, (size_t)n, &lim, &req, msg,
	                           sizeof(msg));
	if (err)
		return native_raise(err, msg);
	if (!native_is_register(req.kind))
		return native_to_dict(&req, native_request_fields);
	memset(&reg, 0, sizeof(reg));
	err = fprep_register_request_decode(buf, (size_t)n, &reg, msg,
	                                    sizeof(msg));
	if (err)
		return native_raise(err, msg);
	return native_to_dict(&reg, native_register_fields);
}

static PyObject *native_default_url(PyObject *self, PyObject *unused)
{
	char buf[4096];

	(void)self;
	(void)unused;
	if (fprep_default_url(buf, sizeof(buf)) != 0)
		return native_raise(FPREP_ELIMIT,
		                    "the default URL is too long");
	return PyUnicode_FromString(buf);
}

/* cuda_allocation(ptr): the allocation holding the device memory at ptr,
 * as the daemon is told of it (fprep_cuda_pointer_lookup): (base, size, IPC
 * handle, device UUID, device ordinal). Raises UnsupportedError (no CUDA
 * driver), InvalidRequestError (not device memory, no IPC handle) or
 * CudaError. */
static PyObject *native_cuda_allocation(PyObject *self, PyObject *arg)
{
	unsigned long long ptr = PyLong_AsUnsignedLongLong(arg);
	char msg[FPREP_MESSAGE_SIZE];
	fprep_cuda_pointer p;
	int err;

	(void)self;
	if (ptr == (unsigned long long)-1 && PyErr_Occurred())
		return NULL;
	msg[0] = '\0';
	Py_BEGIN_ALLOW_THREADS err = fprep_cuda_pointer_lookup(
	        (const void *)(uintptr_t)ptr, 1, &p, msg, sizeof(msg));
	Py_END_ALLOW_THREADS if (err) return native_raise(err, msg);
	return Py_BuildValue("(KKy#y#i)", ptr - (unsigned long long)p.offset,
	                     (unsigned long long)p.alloc_size,
	                     (const char *)p.handle,
	                     (Py_ssize_t)sizeof(p.handle), (const char *)p.uuid,
	                     (Py_ssize_t)sizeof(p.uuid), p.ordinal);
}

/* cuda_pointer(ptr): (buffer ID, device ordinal) of the allocation
 * holding the device memory at ptr, with one driver call
 * (fprep_cuda_pointer_id): the ID is unique within the process for its whole
 * life, so it keys what cuda_allocation found. Raises UnsupportedError (no
 * CUDA driver), InvalidRequestError (not device memory) or CudaError. */
static PyObject *native_cuda_pointer(PyObject *self, PyObject *arg)
{
	unsigned long long ptr = PyLong_AsUnsignedLongLong(arg);
	char msg[FPREP_MESSAGE_SIZE];
	uint64_t id;
	int ordinal, err;

	(void)self;
	if (ptr == (unsigned long long)-1 && PyErr_Occurred())
		return NULL;
	msg[0] = '\0';
	Py_BEGIN_ALLOW_THREADS err = fprep_cuda_pointer_id(
	        (const void *)(uintptr_t)ptr, &id, &ordinal, msg, sizeof(msg));
	Py_END_ALLOW_THREADS if (err) return native_raise(err, msg);
	return Py_BuildValue("(Ki)", (unsigned long long)id, ordinal);
}

static PyObject *native_err_name(PyObject *self, PyObject *arg)
{
	long err = PyLong_AsLong(arg);

	(void)self;
	if (err == -1 && PyErr_Occurred())
		return NULL;
	return PyUnicode_FromString(fprep_err_name((int)err));
}

static PyMethodDef native_functions[] = {
        {"set_error_factory", native_set_error_factory, METH_O,
         "factory(code, text) -> the exception to raise."},
        {"decode_reply", native_decode_reply, METH_O,
         "fprep_reply_decode: bytes -> dict of the header's fields."},
        {"encode_reply", native_encode_reply, METH_O,
         "fprep_reply_encode: dict -> 256 bytes."},
        {"decode_request", native_decode_request, METH_O,
         "fprep_request_decode (no limits): bytes -> dict."},
        {"default_url", native_default_url, METH_NOARGS, "fprep_default_url."},
        {"err_name", native_err_name, METH_O, "fprep_err_name."},
        {"cuda_allocation", native_cuda_allocation, METH_O,
         "(base, size, handle, uuid, ordinal) of the allocation at ptr."},
        {"cuda_pointer", native_cuda_pointer, METH_O,
         "(buffer id, ordinal) of the allocation at ptr: one driver call."},
        {"set_ring_classes", native_set_ring_classes, METH_VARARGS,
         "set_ring_classes(RingFrame, RingResult, Timings)."},
        {"timings", native_timings, METH_O,
         "timings(result) -> the result's Timings."},
        {"address", native_address, METH_O,
         "address(array) -> the address of its first byte."},
        {"tensor", native_tensor, METH_O,
         "tensor(result) -> a numpy array over its tensor."},
        {NULL, NULL, 0, NULL}};

/* The constants of protocol.h and frameprep.h that the package mirrors
 * (its tests check them against these). */
static int native_add_constants(PyObject *m)
{
	static const struct {
		const char *name;
		long long value;
	} k[] = {
#define K(name) {#name, name}
	        K(FPREP_PROTOCOL_VERSION),
	        K(FPREP_REQUEST_MAGIC),
	        K(FPREP_REPLY_MAGIC),
	        K(FPREP_REQUEST_HEADER_SIZE),
	        K(FPREP_REPLY_HEADER_SIZE),
	        K(FPREP_MESSAGE_SIZE),
	        K(FPREP_REGION_NAME_MAX),
	        K(FPREP_LOC_F_SHM_REPLY),
	        K(FPREP_REPLY_F_INPUT_RELEASED),
	        K(FPREP_CUDA_HANDLE_SIZE),
	        K(FPREP_CUDA_UUID_SIZE),
	        K(FPREP_DOORBELL_HEADER_SIZE),
	        K(FPREP_DOORBELL_ENTRY_SIZE),
	        K(FPREP_DOORBELL_ENTRIES_MAX),
	        K(FPREP_KIND_FRAME),
	        K(FPREP_KIND_INFO),
	        K(FPREP_KIND_ECHO),
	        K(FPREP_KIND_REGISTER),
	        K(FPREP_KIND_UNREGISTER),
	        K(FPREP_KIND_REGISTER_CUDA),
	        K(FPREP_KIND_DOORBELL),
	        K(FPREP_KIND_ROIS),
	        K(FPREP_KIND_BATCH),
	        K(FPREP_ROUNDING_FLOAT),
	        K(FPREP_ROUNDING_OPENCV),
	        K(FPREP_PIX_BGR8),
	        K(FPREP_PIX_RGB8),
	        K(FPREP_PIX_BGRA8),
	        K(FPREP_PIX_RGBA8),
	        K(FPREP_PIX_GRAY8),
	        K(FPREP_PIX_NV12),
	        K(FPREP_PIX_I420),
	        K(FPREP_PIX_YUYV),
	        K(FPREP_PIX_JPEG),
	        K(FPREP_MATRIX_BT601),
	        K(FPREP_MATRIX_BT709),
	        K(FPREP_MATRIX_BT2020),
	        K(FPREP_RANGE_LIMITED),
	        K(FPREP_RANGE_FULL),
	        K(FPREP_RESIZE_LETTERBOX),
	        K(FPREP_RESIZE_STRETCH),
	        K(FPREP_ORDER_RGB),
	        K(FPREP_ORDER_BGR),
	        K(FPREP_ORDER_GRAY),
	        K(FPREP_DTYPE_F32),
	        K(FPREP_DTYPE_F16),
	        K(FPREP_DTYPE_U8),
	        K(FPREP_LAYOUT_NCHW),
	        K(FPREP_LAYOUT_NHWC),
	        K(FPREP_LOC_INLINE),
	        K(FPREP_LOC_SHM),
	        K(FPREP_LOC_CUDA),
#define E(name, num, text) {"FPREP_" #name, num},
	        FPREP_ERRNO_MAP(E)
#undef E
#undef K
	};
	PyObject *d = PyDict_New();

	if (d == NULL)
		return -1;
	for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
		PyObject *v = PyLong_FromLongLong(k[i].value);

		if (v == NULL || PyDict_SetItemString(d, k[i].name, v)) {
			Py_XDECREF(v);
			Py_DECREF(d);
			return -1;
		}
		Py_DECREF(v);
	}
	if (PyModule_AddObject(m, "constants", d)) {
		Py_DECREF(d);
		return -1;
	}
	return PyModule_AddStringConstant(m, "VERSION", FPREP_VERSION_STRING);
}

static int native_add_type(PyObject *m, PyType_Spec *spec, PyObject **tp)
{
	const char *dot = strrchr(spec->name, '.');

	*tp = PyType_FromSpec(spec);
	if (*tp == NULL)
		return -1;
	Py_INCREF(*tp);
	if (PyModule_AddObject(m, dot + 1, *tp)) {
		Py_DECREF(*tp);
		return -1;
	}
	return 0;
}

static struct PyModuleDef native_module = {
        PyModuleDef_HEAD_INIT,
        "frameprep._native",
        "The binding of libframeprep (see _native.c).",
        -1,
        native_functions,
        NULL,
        NULL,
        NULL,
        NULL};

PyMODINIT_FUNC PyInit__native(void)
{
	PyObject *m = PyModule_Create(&native_module);

	if (m == NULL)
		return NULL;
	(void)pthread_atfork(NULL, NULL, native_fork_child);
	if (native_add_type(m, &Request_spec, &Request_type) ||
	    native_add_type(m, &Result_spec, &Result_type) ||
	    native_add_type(m, &Client_spec, &Client_type) ||
	    native_add_type(m, &Pending_spec, &Pending_type) ||
	    native_add_type(m, &Gate_spec, &Gate_type) ||
	    native_add_type(m, &CRing_spec, &CRing_type) ||
	    native_add_type(m, &Hold_spec, &Hold_type) ||
	    native_add_type(m, &RingCore_spec, &RingCore_type) ||
	    native_add_type(m, &RingResultCore_spec, &RingResultCore_type) ||
	    native_add_type(m, &Stream_spec, &Stream_type) ||
	    native_add_type(m, &StreamTensor_spec, &StreamTensor_type) ||
	    native_add_type(m, &Demux_spec, &Demux_type) ||
	    native_add_constants(m) || native_rules_add(m)) {
		Py_DECREF(m);
		return NULL;
	}
	return m;
}
