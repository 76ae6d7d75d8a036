/*
 * _native.c: frameprep._native, the CPython binding of libframeprep.
 *
 * The design is simple: the Python package keeps what is Pythonic (numpy
 * views, asyncio, exceptions, options) and this module hands everything
 * else to the C library: the wire codec, the client (its sockets, call
 * slots, stages, replies in shared memory), regions and their doorbells.
 * It is written against the limited API of Python 3.10 (abi3), so one
 * binary serves every later version. Py_buffer is not in that API before
 * 3.11, so memory comes in as the object that owns it (bytes, a numpy
 * array read through numpy's stable array struct, a Region) and its
 * address and length are found here, never taken as ints from Python:
 * every length, offset and slot that the caller gives is checked against
 * that object (native_bytes_of, native_slots_fit) before memory is read
 * or viewed. Device pointers are only ever handed to the CUDA driver,
 * which says whether they are device memory (cuda_ptr.c).
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
 *   Region    an fprep_region (shared memory), its doorbell and its
 *             requests; its mapping lives until the object goes.
 *   Pending   an fprep_pending (fprep_client_submit): its done callback
 *             calls a Python callable with the GIL held.
 */
#define Py_LIMITED_API 0x030A0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client_entry.h"
#include "client_internal.h"
#include "cuda_ptr.h"
#include "frameprep/frameprep.h"
#include "ops.h"

static PyObject *native_factory; /* frameprep.errors' error_for_status */

/* native_raise sets the exception of err with text, through the factory
 * when it is set, else a RuntimeError. Returns NULL. */
static PyObject *native_raise(int err, const char *text)
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

/* Field tables: a struct's fields by name, type and offset, for the
 * conversions between dicts and the C structs. */
enum { F_U8, F_U16, F_U32, F_U64, F_F32, F_F32X3, F_U32X4, F_STR, F_BYTES };

struct native_field {
	const char *name;
	int type;
	size_t offset;
	size_t size; /* F_STR, F_BYTES: bytes of the array */
};

#define RQ(name, type)                                                         \
	{                                                                      \
#name, type, offsetof(fprep_request, name), 0                  \
	}
static const struct native_field native_request_fields[] = {
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
static const struct native_field native_register_fields[] = {
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
static const struct native_field native_reply_fields[] = {
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
static int native_from_dict(void *base, const struct native_field *fields,
                            PyObject *d, const char *what)
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

static PyObject *native_to_dict(const void *base,
                                const struct native_field *fields)
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

static int native_is_register(unsigned kind)
{
	return kind == FPREP_KIND_REGISTER || kind == FPREP_KIND_UNREGISTER ||
	       kind == FPREP_KIND_REGISTER_CUDA || kind == FPREP_KIND_DOORBELL;
}

/* native_kind_of reads the "kind" of a fields dict (FRAME if absent). */
static int native_kind_of(PyObject *d, unsigned *kind)
{
	PyObject *v = PyDict_Check(d) ? PyDict_GetItemString(d, "kind") : NULL;
	uint64_t x = FPREP_KIND_FRAME;

	if (v != NULL && native_get_uint(v, UINT16_MAX, "kind", &x))
		return -1;
	*kind = (unsigned)x;
	return 0;
}

/* ---- Request: a request made once from its fields ---- */

typedef struct {
	PyObject_HEAD int is_register;
	fprep_request req;
	fprep_register_request reg;
} RequestObject;

static int Request_init(PyObject *op, PyObject *args, PyObject *kw)
{
	RequestObject *self = (RequestObject *)op;
	PyObject *d;
	unsigned kind;

	(void)kw;
	if (!PyArg_ParseTuple(args, "O!", &PyDict_Type, &d))
		return -1;
	if (native_kind_of(d, &kind))
		return -1;
	memset(&self->req, 0, sizeof(self->req));
	memset(&self->reg, 0, sizeof(self->reg));
	self->is_register = native_is_register(kind);
	if (self->is_register)
		return native_from_dict(&self->reg, native_register_fields, d,
		                        "a register request");
	return native_from_dict(&self->req, native_request_fields, d,
	                        "a request");
}

static PyObject *Request_encode(PyObject *op, PyObject *unused)
{
	RequestObject *self = (RequestObject *)op;
	uint8_t buf[FPREP_REQUEST_HEADER_SIZE];

	(void)unused;
	if (self->is_register)
		fprep_register_request_encode(&self->reg, buf);
	else
		fprep_request_encode(&self->req, buf);
	return PyBytes_FromStringAndSize((const char *)buf, sizeof(buf));
}

static PyMethodDef Request_methods[] = {
        {"encode", Request_encode, METH_NOARGS,
         "The 128-byte wire header (fprep_request_encode)."},
        {NULL, NULL, 0, NULL}};

static PyType_Slot Request_slots[] = {
        {Py_tp_init, Request_init},
        {Py_tp_methods, Request_methods},
        {Py_tp_doc, "Request(fields: dict): a request's C struct."},
        {0, NULL}};

static PyType_Spec Request_spec = {"frameprep._native.Request",
                                   sizeof(RequestObject), 0, Py_TPFLAGS_DEFAULT,
                                   Request_slots};
static PyObject *Request_type;

/* ---- Result: one reply, owning its payload ---- */

typedef struct {
	PyObject_HEAD fprep_result res;
	PyObject *owner; /* what the payload needs alive, or NULL */
} ResultObject;

static PyObject *Result_type;

static PyObject *native_result_new(const fprep_result *res)
{
	ResultObject *r =
	        PyObject_New(ResultObject, (PyTypeObject *)Result_type);

	if (r == NULL) {
		fprep_result tmp = *res;
		fprep_result_fini(&tmp);
		return NULL;
	}
	r->res = *res;
	r->owner = NULL;
	return (PyObject *)r;
}

static void Result_dealloc(PyObject *op)
{
	ResultObject *self = (ResultObject *)op;
	PyTypeObject *tp = Py_TYPE(op);
	freefunc free_fn = (freefunc)PyType_GetSlot(tp, Py_tp_free);

	fprep_result_fini(&self->res);
	Py_XDECREF(self->owner);
	free_fn(op);
	Py_DECREF(tp);
}

static PyObject *Result_get_status(PyObject *op, void *c)
{
	(void)c;
	return PyLong_FromUnsignedLong(((ResultObject *)op)->res.header.status);
}

static PyObject *Result_get_message(PyObject *op, void *c)
{
	(void)c;
	return PyUnicode_DecodeUTF8(
	        ((ResultObject *)op)->res.header.message,
	        (Py_ssize_t)strnlen(((ResultObject *)op)->res.header.message,
	                            FPREP_MESSAGE_SIZE),
	        "replace");
}

static PyObject *Result_get_request_id(PyObject *op, void *c)
{
	(void)c;
	return PyLong_FromUnsignedLongLong(
	        ((ResultObject *)op)->res.header.request_id);
}

static PyObject *Result_get_header(PyObject *op, void *c)
{
	uint8_t buf[FPREP_REPLY_HEADER_SIZE];

	(void)c;
	fprep_reply_encode(&((ResultObject *)op)->res.header, buf);
	return PyBytes_FromStringAndSize((const char *)buf, sizeof(buf));
}

/* Result.places: scale_x, scale_y, pad_x, pad_y and the six timings. */
static PyObject *Result_get_places(PyObject *op, void *c)
{
	const fprep_reply_header *h = &((ResultObject *)op)->res.header;

	(void)c;
	return Py_BuildValue(
	        "(ddddkkkkkk)", (double)h->scale_x, (double)h->scale_y,
	        (double)h->pad_x, (double)h->pad_y,
	        (unsigned long)h->t_queue_us, (unsigned long)h->t_compute_us,
	        (unsigned long)h->t_h2d_us, (unsigned long)h->t_kernel_us,
	        (unsigned long)h->t_d2h_us, (unsigned long)h->t_total_us);
}

/* Result.timings: the daemon's timings, microseconds: queue, compute,
 * h2d, kernel, d2h, total and decode (Timings' fields, in order). */
static PyObject *Result_get_timings(PyObject *op, void *c)
{
	const fprep_reply_header *h = &((ResultObject *)op)->res.header;

	(void)c;
	return Py_BuildValue(
	        "(kkkkkkk)", (unsigned long)h->t_queue_us,
	        (unsigned long)h->t_compute_us, (unsigned long)h->t_h2d_us,
	        (unsigned long)h->t_kernel_us, (unsigned long)h->t_d2h_us,
	        (unsigned long)h->t_total_us, (unsigned long)h->t_decode_us);
}

static PyObject *Result_get_fields(PyObject *op, void *c)
{
	(void)c;
	return native_to_dict(&((ResultObject *)op)->res.header,
	                      native_reply_fields);
}

static const char *native_typestr(unsigned dtype)
{
	switch (dtype) {
	case FPREP_DTYPE_F32:
		return "<f4";
	case FPREP_DTYPE_F16:
		return "<f2";
	case FPREP_DTYPE_U8:
		return "|u1";
	}
	return NULL;
}

/* Result.__array_interface__: the tensor in the payload, as its header
 * describes it (a reply the decoder accepted: ndim, dtype and size
 * agree). */
static PyObject *Result_get_array(PyObject *op, void *c)
{
	const fprep_result *res = &((ResultObject *)op)->res;
	const fprep_reply_header *h = &res->header;
	const char *ts = native_typestr(h->dtype);
	PyObject *shape;
	/* A ROIS or BATCH reply's payload is the tensor, then N transform
	 * records. */
	uint64_t xfs = h->kind == FPREP_KIND_ROIS || h->kind == FPREP_KIND_BATCH
	                       ? (uint64_t)h->shape[0] * FPREP_ELEMENT_XF_SIZE
	                       : 0;

	(void)c;
	if (ts == NULL || h->ndim < 1 || h->ndim > 4 || res->payload == NULL ||
	    res->payload_size != h->tensor_size + xfs) {
		PyErr_SetString(PyExc_AttributeError,
		                "the reply carries no tensor");
		return NULL;
	}
	shape = PyTuple_New(h->ndim);
	if (shape == NULL)
		return NULL;
	for (unsigned i = 0; i < h->ndim; i++)
		PyTuple_SetItem(shape, i, PyLong_FromUnsignedLong(h->shape[i]));
	return Py_BuildValue("{s:(KO),s:N,s:s,s:i}", "data",
	                     (unsigned long long)(uintptr_t)res->payload,
	                     Py_False, "shape", shape, "typestr", ts, "version",
	                     3);
}

/* Result.element_xfs(): the N transform records of a ROIS or BATCH
 * reply (fprep_result_element_xf), as (resized_w, resized_h, pad_x,
 * pad_y, scale_x, scale_y, origin_x, origin_y) tuples; ValueError for
 * another reply. */
static PyObject *Result_element_xfs(PyObject *op, PyObject *unused)
{
	const fprep_result *res = &((ResultObject *)op)->res;
	unsigned kind = res->header.kind;
	uint32_t n = res->header.shape[0];
	PyObject *list;

	(void)unused;
	if ((kind != FPREP_KIND_ROIS && kind != FPREP_KIND_BATCH) ||
	    res->header.status != FPREP_OK) {
		PyErr_SetString(PyExc_ValueError,
		                "not the reply of a ROIS or BATCH request");
		return NULL;
	}
	list = PyList_New(n);
	if (list == NULL)
		return NULL;
	for (uint32_t k = 0; k < n; k++) {
		fprep_element_xf xf;
		PyObject *t;

		if (fprep_result_element_xf(res, k, &xf) != 0) {
			Py_DECREF(list);
			PyErr_Format(PyExc_ValueError,
			             "the reply has no transform %u",
			             (unsigned)k);
			return NULL;
		}
		t = Py_BuildValue("(kkkkdddd)", (unsigned long)xf.resized_w,
		                  (unsigned long)xf.resized_h,
		                  (unsigned long)xf.pad_x,
		                  (unsigned long)xf.pad_y, (double)xf.scale_x,
		                  (double)xf.scale_y, (double)xf.origin_x,
		                  (double)xf.origin_y);
		if (t == NULL) {
			Py_DECREF(list);
			return NULL;
		}
		PyList_SetItem(list, k, t);
	}
	return list;
}

static PyObject *Result_payload(PyObject *op, PyObject *unused)
{
	const fprep_result *res = &((ResultObject *)op)->res;

	(void)unused;
	if (res->payload == NULL)
		return PyBytes_FromStringAndSize("", 0);
	return PyBytes_FromStringAndSize(res->payload,
	                                 (Py_ssize_t)res->payload_size);
}

static PyGetSetDef Result_getset[] = {
        {"status", Result_get_status, NULL, "The daemon's status.", NULL},
        {"message", Result_get_message, NULL, "The daemon's sentence.", NULL},
        {"request_id", Result_get_request_id, NULL, "The request's id.", NULL},
        {"header", Result_get_header, NULL, "The reply header's 256 bytes.",
         NULL},
        {"places", Result_get_places, NULL,
         "scale_x, scale_y, pad_x, pad_y and the six timings.", NULL},
        {"fields", Result_get_fields, NULL, "The decoded header, a dict.",
         NULL},
        {"timings", Result_get_timings, NULL,
         "queue, compute, h2d, kernel, d2h, total and decode, us.", NULL},
        {"__array_interface__", Result_get_array, NULL,
         "The tensor in the payload.", NULL},
        {NULL, NULL, NULL, NULL, NULL}};

static PyMethodDef Result_methods[] = {
        {"payload", Result_payload, METH_NOARGS, "A copy of the payload."},
        {"element_xfs", Result_element_xfs, METH_NOARGS,
         "A ROIS or BATCH reply's transform records."},
        {NULL, NULL, 0, NULL}};

static PyType_Slot Result_slots[] = {
        {Py_tp_dealloc, Result_dealloc},
        {Py_tp_getset, Result_getset},
        {Py_tp_methods, Result_methods},
        {Py_tp_doc, "A reply (fprep_result), owning its payload."},
        {0, NULL}};

static PyType_Spec Result_spec = {"frameprep._native.Result",
                                  sizeof(ResultObject), 0, Py_TPFLAGS_DEFAULT,
                                  Result_slots};

/* ---- numpy arrays, read without numpy's headers ---- */

/* numpy's C API table (its _ARRAY_API capsule), loaded at the first
 * call that meets a numpy array; the entries used are numpy's stable ones, the
 * same in 1.x and 2.x: PyArray_New (93) and PyArray_SetBaseObject (282). */
static void **native_np_api;

typedef PyObject *(*native_np_new_fn)(PyTypeObject *, int, const Py_intptr_t *,
                                      int, const Py_intptr_t *, void *, int,
                                      int, PyObject *);
typedef int (*native_np_set_base_fn)(PyObject *, PyObject *);

static int native_np_load(void)
{
	PyObject *m, *cap;

	if (native_np_api != NULL)
		return 0;
	m = PyImport_ImportModule("numpy._core._multiarray_umath");
	if (m == NULL) {
		PyErr_Clear();
		m = PyImport_ImportModule("numpy.core._multiarray_umath");
	}
	if (m == NULL)
		return -1;
	cap = PyObject_GetAttrString(m, "_ARRAY_API");
	Py_DECREF(m);
	if (cap == NULL)
		return -1;
	native_np_api = PyCapsule_GetPointer(cap, NULL);
	Py_DECREF(cap);
	return native_np_api == NULL ? -1 : 0;
}

/* The leading fields of numpy's array (PyArrayObject_fields) and of its
 * dtype (PyArray_Descr) up to type_num: the same in numpy 1.x and 2.x. */
struct native_np_array {
	PyObject_HEAD char *data;
	int nd;
	Py_intptr_t *dimensions;
	Py_intptr_t *strides;
	PyObject *base;
	PyObject *descr;
	int flags;
};

struct native_np_descr {
	PyObject_HEAD PyTypeObject *typeobj;
	char kind, type, byteorder, flags;
	int type_num;
};

/* native_np_itemsize is the bytes of one element of a (a numpy array):
 * 1 for bool and (u)int8, numpy's itemsize for any other type. */
static Py_ssize_t native_np_itemsize(PyObject *a)
{
	const struct native_np_descr *d =
	        (const struct native_np_descr
	                 *)((const struct native_np_array *)a)
	                ->descr;
	PyObject *v;
	Py_ssize_t n;

	if (d->type_num >= 0 && d->type_num <= 2) /* NPY_BOOL, (U)BYTE */
		return 1;
	if ((v = PyObject_GetAttrString(a, "itemsize")) == NULL)
		return -1;
	n = PyLong_AsSsize_t(v);
	Py_DECREF(v);
	return n;
}

/* native_bytes_of finds the memory of src for a call that reads need
 * bytes from its first byte on, what naming the argument in errors:
 * bytes (its length), a numpy array (from its first element to the end
 * of its last, its strides followed), or None (no memory: *addr NULL,
 * need not checked; the library refuses a call that needs bytes without
 * them). Sets *addr; raises TypeError for another type and ValueError
 * when src holds fewer than need bytes. The caller keeps src referenced
 * while *addr is used. (No buffer protocol: it is not in the limited API
 * of 3.10; bytearray and memoryview go through numpy.frombuffer, which
 * keeps them from being resized.) */
static int native_bytes_of(PyObject *src, const char *what,
                           unsigned long long need, const void **addr)
{
	unsigned long long have, hi = 0, step;
	const struct native_np_array *a;
	Py_ssize_t item;

	*addr = NULL;
	if (src == Py_None)
		return 0;
	if (PyBytes_Check(src)) {
		char *p;
		Py_ssize_t n;

		if (PyBytes_AsStringAndSize(src, &p, &n))
			return -1;
		*addr = p;
		have = (unsigned long long)n;
		goto check;
	}
	if (native_np_load())
		return -1;
	if (!PyObject_TypeCheck(src, (PyTypeObject *)native_np_api[2])) {
		PyErr_Format(PyExc_TypeError,
		             "%s: bytes or a numpy array, not %R", what,
		             (PyObject *)Py_TYPE(src));
		return -1;
	}
	a = (const struct native_np_array *)src;
	if ((item = native_np_itemsize(src)) < 0)
		return -1;
	have = (unsigned long long)item;
	for (int i = 0; i < a->nd; i++) {
		if (a->dimensions[i] <= 0) {
			have = 0;
			break;
		}
		if (a->strides[i] <= 0)
			continue;
		if (__builtin_mul_overflow(
		            (unsigned long long)(a->dimensions[i] - 1),
		            (unsigned long long)a->strides[i], &step) ||
		    __builtin_add_overflow(hi, step, &hi)) {
			PyErr_Format(PyExc_ValueError,
			             "%s: the array's extent overflows", what);
			return -1;
		}
	}
	if (have > 0 && __builtin_add_overflow(have, hi, &have)) {
		PyErr_Format(PyExc_ValueError,
		             "%s: the array's extent overflows", what);
		return -1;
	}
	*addr = a->data;
check:
	if (need > have) {
		PyErr_Format(PyExc_ValueError,
		             "%s: %llu bytes to read, but the %s holds %llu",
		             what, need, PyBytes_Check(src) ? "bytes" : "array",
		             have);
		return -1;
	}
	return 0;
}

/* ---- Client ---- */

typedef struct {
	PyObject_HEAD fprep_client *client;
	pthread_mutex_t mtx; /* calls and closed */
	pthread_cond_t cv;
	unsigned calls; /* blocking calls in progress */
	int closed;
	unsigned fork_gen; /* native_fork_gen when it was opened */
} ClientObject;

static PyObject *Client_type;

/* Forks since the module was loaded (counted in the child). A Client the
 * parent opened is the parent's: in a child its calls raise EFORKED before
 * they take its lock (a thread of the parent may have held it at the
 * fork, and its calls in progress never end there), and closing it only
 * forgets it. */
static _Atomic unsigned native_fork_gen;

static void native_fork_child(void)
{
	atomic_fetch_add_explicit(&native_fork_gen, 1, memory_order_relaxed);
}

static int native_forked(const ClientObject *c)
{
	return c->fork_gen !=
	       atomic_load_explicit(&native_fork_gen, memory_order_relaxed);
}

static PyObject *native_raise_forked(void)
{
	return native_raise(FPREP_EFORKED,
	                    "this client was opened before the process "
	                    "forked (it is the parent's): a child process "
	                    "must open a client of its own, e.g. "
	                    "frameprep.Client() in the worker");
}

/* native_enter counts a call on c, or raises ClosedError. */
static int native_enter(ClientObject *c)
{
	int closed;

	if (native_forked(c)) {
		native_raise_forked();
		return -1;
	}
	pthread_mutex_lock(&c->mtx);
	closed = c->closed;
	if (!closed)
		c->calls++;
	pthread_mutex_unlock(&c->mtx);
	if (closed) {
		native_raise(FPREP_ECLOSED, "the client was closed");
		return -1;
	}
	return 0;
}

static void native_leave(ClientObject *c)
{
	pthread_mutex_lock(&c->mtx);
	if (--c->calls == 0)
		pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mtx);
}

/* native_fail raises err with the client's last error sentence. */
static PyObject *native_fail(ClientObject *c, int err)
{
	const char *text = fprep_client_last_error(c->client);

	return native_raise(err, text);
}

static int Client_init(PyObject *op, PyObject *args, PyObject *kw)
{
	static char *names[] = {"url", "timeout_ms", "trust_owner", NULL};
	ClientObject *self = (ClientObject *)op;
	const char *url = NULL, *trust = NULL;
	int timeout_ms = 0, err;
	fprep_client *c = NULL;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "ziz", names, &url,
	                                 &timeout_ms, &trust))
		return -1;
	if (self->client != NULL) {
		PyErr_SetString(PyExc_RuntimeError, "already open");
		return -1;
	}
	Py_BEGIN_ALLOW_THREADS err =
	        fprep_client_open_trusting(&c, url, timeout_ms, trust);
	Py_END_ALLOW_THREADS if (err)
	{
		native_raise(err, fprep_client_last_error(NULL));
		return -1;
	}
	self->client = c;
	return 0;
}

static PyObject *Client_new(PyTypeObject *tp, PyObject *args, PyObject *kw)
{
	allocfunc alloc = (allocfunc)PyType_GetSlot(tp, Py_tp_alloc);
	ClientObject *self = (ClientObject *)alloc(tp, 0);

	(void)args;
	(void)kw;
	if (self == NULL)
		return NULL;
	self->client = NULL;
	pthread_mutex_init(&self->mtx, NULL);
	pthread_cond_init(&self->cv, NULL);
	self->calls = 0;
	self->closed = 0;
	self->fork_gen = atomic_load(&native_fork_gen);
	return (PyObject *)self;
}

/* native_close closes the client once the calls in progress ended. */
static void native_close(ClientObject *self)
{
	fprep_client *c;

	if (native_forked(self)) { /* the parent's: abandoned here */
		self->closed = 1;
		self->client = NULL;
		return;
	}
	pthread_mutex_lock(&self->mtx);
	self->closed = 1;
	while (self->calls > 0)
		pthread_cond_wait(&self->cv, &self->mtx);
	c = self->client;
	self->client = NULL;
	pthread_mutex_unlock(&self->mtx);
	fprep_client_close(c);
}

static PyObject *Client_close(PyObject *op, PyObject *unused)
{
	(void)unused;
	Py_BEGIN_ALLOW_THREADS native_close((ClientObject *)op);
	Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

static void Client_dealloc(PyObject *op)
{
	ClientObject *self = (ClientObject *)op;
	PyTypeObject *tp = Py_TYPE(op);
	freefunc free_fn = (freefunc)PyType_GetSlot(tp, Py_tp_free);

	native_close(self);
	pthread_cond_destroy(&self->cv);
	pthread_mutex_destroy(&self->mtx);
	free_fn(op);
	Py_DECREF(tp);
}

/* native_source sets the source fields of a FRAME request: the frame
 * (src: bytes, a numpy array, or None where the source is not inline) and
 * its span, format, size and planes. */
struct native_src {
	PyObject *src;
	unsigned long long span;
	unsigned fmt, w, h, stride, uvs, uoff, voff;
};

static void native_set_source(fprep_request *req, const struct native_src *s)
{
	req->src_format = (uint16_t)s->fmt;
	req->src_width = s->w;
	req->src_height = s->h;
	req->src_stride = s->stride;
	req->input_size = s->span;
	req->uv_stride = (uint16_t)s->uvs;
	req->u_offset = s->uoff;
	req->v_offset = s->voff;
}

#define NATIVE_SRC_FMT "OKIIIIIII"
#define NATIVE_SRC_ARGS(s)                                                     \
	&(s).src, &(s).span, &(s).fmt, &(s).w, &(s).h, &(s).stride, &(s).uvs,  \
	        &(s).uoff, &(s).voff

/* native_request runs fprep_client_request without the GIL and returns a
 * Result (the daemon's status unchecked), or raises. */
static PyObject *native_request(ClientObject *self, fprep_request *req,
                                const void *payload)
{
	fprep_result res;
	int err;

	if (native_enter(self))
		return NULL;
	Py_BEGIN_ALLOW_THREADS err =
	        fprep_client_request(self->client, req, payload, &res);
	Py_END_ALLOW_THREADS if (err)
	{
		native_fail(self, err);
		native_leave(self);
		return NULL;
	}
	native_leave(self);
	return native_result_new(&res);
}

/* Client.frame(request, frame, span, format, width, height, stride,
 * uv_stride, u_offset, v_offset, out_loc=0, out_region=0, out_offset=0,
 * out_capacity=0): an inline FRAME of the request's options for the first
 * span bytes of frame (bytes or a numpy array; ValueError when it holds
 * fewer), staged through shared memory on ipc://. out_loc INLINE (0)
 * returns the tensor in the reply; CUDA has the daemon write it at
 * (out_region, out_offset) of a registered CUDA region, out_capacity bytes
 * there (the frame is staged all the same; the daemon checks them against
 * the region). */
static PyObject *Client_frame(PyObject *op, PyObject *args)
{
	PyObject *tmpl;
	struct native_src s;
	unsigned char out_loc = FPREP_LOC_INLINE;
	unsigned out_region = 0;
	unsigned long long out_off = 0, out_cap = 0;
	fprep_request req;
	const void *addr;

	if (!PyArg_ParseTuple(args, "O!" NATIVE_SRC_FMT "|bIKK", Request_type,
	                      &tmpl, NATIVE_SRC_ARGS(s), &out_loc, &out_region,
	                      &out_off, &out_cap))
		return NULL;
	if (out_loc != FPREP_LOC_INLINE && out_loc != FPREP_LOC_CUDA) {
		PyErr_Format(PyExc_ValueError,
		             "out_loc %u: INLINE (0) or CUDA (%d) allowed",
		             (unsigned)out_loc, FPREP_LOC_CUDA);
		return NULL;
	}
	if (native_bytes_of(s.src, "frame", s.span, &addr))
		return NULL;
	req = ((RequestObject *)tmpl)->req;
	native_set_source(&req, &s);
	req.input_loc = FPREP_LOC_INLINE;
	req.output_loc = out_loc;
	req.out_region = out_region;
	req.out_offset = out_off;
	req.out_capacity = out_cap;
	return native_request((ClientObject *)op, &req, addr);
}

/* Client.request(request, payload=None): any request as it is (a
 * register kind through fprep_client_register); payload (bytes or a
 * numpy array) holds an inline FRAME's or ECHO's input_size bytes
 * (ValueError when it holds fewer). */
static PyObject *Client_request(PyObject *op, PyObject *args)
{
	ClientObject *self = (ClientObject *)op;
	PyObject *tmpl, *payload = Py_None;
	fprep_register_request reg;
	fprep_request req;
	fprep_result res;
	const void *addr;
	int err;

	if (!PyArg_ParseTuple(args, "O!|O", Request_type, &tmpl, &payload))
		return NULL;
	if (!((RequestObject *)tmpl)->is_register) {
		unsigned long long need = 0;

		req = ((RequestObject *)tmpl)->req;
		/* What fprep_client_request reads of the payload. */
		if ((req.kind == FPREP_KIND_FRAME ||
		     req.kind == FPREP_KIND_ECHO) &&
		    req.input_loc == FPREP_LOC_INLINE)
			need = req.input_size;
		if (native_bytes_of(payload, "payload", need, &addr))
			return NULL;
		return native_request(self, &req, addr);
	}
	reg = ((RequestObject *)tmpl)->reg;
	if (native_enter(self))
		return NULL;
	Py_BEGIN_ALLOW_THREADS err =
	        fprep_client_register(self->client, &reg, &res);
	Py_END_ALLOW_THREADS if (err)
	{
		native_fail(self, err);
		native_leave(self);
		return NULL;
	}
	native_leave(self);
	return native_result_new(&res);
}

/* native_list_elements reads a list of (type, resize, v0, .., v5, offset)
 * tuples into elements, calloc'ed (the caller frees them), and their count
 * into *n. NULL with an exception set: an item of another shape, or a
 * count out of 1..FPREP_ELEMENTS_MAX. */
static fprep_element *native_list_elements(PyObject *list, Py_ssize_t *n)
{
	fprep_element *els;

	*n = PyList_Size(list);
	if (*n < 1 || *n > FPREP_ELEMENTS_MAX) {
		PyErr_Format(PyExc_ValueError, "%zd elements: 1..%d allowed",
		             *n, FPREP_ELEMENTS_MAX);
		return NULL;
	}
	if ((els = calloc((size_t)*n, sizeof(*els))) == NULL)
		return (fprep_element *)PyErr_NoMemory();
	for (Py_ssize_t k = 0; k < *n; k++) {
		fprep_element *e = &els[k];
		unsigned long long off = 0;

		if (!PyArg_ParseTuple(
		            PyList_GetItem(list, k),
		            "bbffffffK;an "
		            "element is (type, resize, v0..v5, offset)",
		            &e->type, &e->resize, &e->v[0], &e->v[1], &e->v[2],
		            &e->v[3], &e->v[4], &e->v[5], &off)) {
			free(els);
			return NULL;
		}
		e->offset = off;
	}
	return els;
}

/* native_box_elements reads boxes (bytes of N x 4 native float32: x, y,
 * w, h) into N BOX elements of resize 0, calloc'ed (the caller frees
 * them), and their count into *n. NULL with an exception set: not bytes,
 * a length not a multiple of 16, or N out of 1..FPREP_ELEMENTS_MAX. */
static fprep_element *native_box_elements(PyObject *boxes, Py_ssize_t *n)
{
	fprep_element *els;
	char *buf;
	Py_ssize_t len;

	if (!PyBytes_Check(boxes)) {
		PyErr_SetString(PyExc_TypeError,
		                "elements: a list of tuples or bytes of N x 4 "
		                "float32");
		return NULL;
	}
	if (PyBytes_AsStringAndSize(boxes, &buf, &len))
		return NULL;
	*n = len / 16;
	if (len % 16 != 0 || *n < 1 || *n > FPREP_ELEMENTS_MAX) {
		PyErr_Format(PyExc_ValueError,
		             "boxes of %zd bytes: 1..%d boxes of 16 bytes "
		             "allowed",
		             len, FPREP_ELEMENTS_MAX);
		return NULL;
	}
	if ((els = calloc((size_t)*n, sizeof(*els))) == NULL)
		return (fprep_element *)PyErr_NoMemory();
	for (Py_ssize_t k = 0; k < *n; k++) {
		els[k].type = FPREP_ELEM_BOX;
		memcpy(els[k].v, buf + k * 16, 16);
	}
	return els;
}

/* native_elements_span is the bytes of an inline ROIS or BATCH source
 * that fprep_client_elements reads for req and its n elements (as the
 * library's check finds it); 0 when an element is refused (the library
 * then refuses the call before it reads anything). */
static unsigned long long native_elements_span(const fprep_request *req,
                                               const fprep_element *els,
                                               Py_ssize_t n)
{
	uint64_t span = req->kind == FPREP_KIND_ROIS ? req->input_size : 0;
	char why[FPREP_MESSAGE_SIZE];

	if (req->kind != FPREP_KIND_ROIS && req->kind != FPREP_KIND_BATCH)
		return 0;
	for (Py_ssize_t k = 0; k < n; k++)
		if (fprep__element_check(req, (uint32_t)k, &els[k], &span, why,
		                         sizeof(why)) != FPREP_OK)
			return 0;
	return span;
}

/* Client.elements(request, elements, frame, span, format, width, height,
 * stride, uv_stride, u_offset, v_offset, in_loc=0, in_region=0,
 * in_offset=0, out_loc=0, out_region=0, out_offset=0, out_capacity=0):
 * one ROIS or BATCH request (fprep_client_elements) of the request's
 * options (its kind ROIS or BATCH) for the source frame (bytes or a
 * numpy array: one frame of span bytes; for BATCH frame k at
 * elements[k]'s offset in it; ValueError when it holds fewer bytes than
 * the elements reach); elements
 * a list of (type, resize, v0, .., v5, offset) tuples (fprep_element), or
 * bytes of N x 4 native float32 (x, y, w, h): N BOX elements of resize 0,
 * read with no tuple made per box.
 * in_loc INLINE (0) sends frame's bytes; SHM or CUDA names the source
 * where it lies, (in_region, in_offset), and frame is ignored. out_loc
 * INLINE (0) returns the tensor in the reply; SHM or CUDA has the daemon
 * write it at (out_region, out_offset), out_capacity bytes there. (The
 * locations are arguments so that one request made per set of options
 * serves every call.) Returns a Result (the daemon's status unchecked),
 * or raises (a bad element: the error names its index). */
static PyObject *Client_elements(PyObject *op, PyObject *args)
{
	ClientObject *self = (ClientObject *)op;
	PyObject *tmpl, *list;
	struct native_src s;
	unsigned char in_loc = 0, out_loc = 0;
	unsigned in_region = 0, out_region = 0;
	unsigned long long in_off = 0, out_off = 0, out_cap = 0;
	fprep_request req;
	fprep_element *els;
	fprep_result res;
	const void *addr = NULL;
	Py_ssize_t n;
	int err;

	if (!PyArg_ParseTuple(args, "O!O" NATIVE_SRC_FMT "|bIKbIKK",
	                      Request_type, &tmpl, &list, NATIVE_SRC_ARGS(s),
	                      &in_loc, &in_region, &in_off, &out_loc,
	                      &out_region, &out_off, &out_cap))
		return NULL;
	els = PyList_Check(list) ? native_list_elements(list, &n)
	                         : native_box_elements(list, &n);
	if (els == NULL)
		return NULL;
	req = ((RequestObject *)tmpl)->req;
	native_set_source(&req, &s);
	req.input_loc = in_loc;
	req.in_region = in_region;
	req.in_offset = in_off;
	req.output_loc = out_loc;
	req.out_region = out_region;
	req.out_offset = out_off;
	req.out_capacity = out_cap;
	/* Inline, the bytes read are checked against frame's; else the
	 * source lies in a region and frame is ignored. */
	if (in_loc == FPREP_LOC_INLINE &&
	    native_bytes_of(s.src, "frame", native_elements_span(&req, els, n),
	                    &addr)) {
		free(els);
		return NULL;
	}
	if (native_enter(self)) {
		free(els);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS err = fprep_client_elements(
	        self->client, &req, els, (uint32_t)n, addr, &res);
	Py_END_ALLOW_THREADS free(els);
	if (err) {
		native_fail(self, err);
		native_leave(self);
		return NULL;
	}
	native_leave(self);
	return native_result_new(&res);
}

static PyObject *Client_info(PyObject *op, PyObject *unused)
{
	ClientObject *self = (ClientObject *)op;
	fprep_result res;
	int err;

	(void)unused;
	if (native_enter(self))
		return NULL;
	Py_BEGIN_ALLOW_THREADS err = fprep_client_info(self->client, &res);
	Py_END_ALLOW_THREADS if (err)
	{
		native_fail(self, err);
		native_leave(self);
		return NULL;
	}
	native_leave(self);
	return native_result_new(&res);
}

static PyObject *Client_set_staging(PyObject *op, PyObject *arg)
{
	ClientObject *self = (ClientObject *)op;
	int on = PyObject_IsTrue(arg);

	if (on < 0 || native_enter(self))
		return NULL;
	fprep_client_set_staging(self->client, on);
	native_leave(self);
	Py_RETURN_NONE;
}

static PyObject *Client_set_spin(PyObject *op, PyObject *arg)
{
	ClientObject *self = (ClientObject *)op;
	unsigned long us = PyLong_AsUnsignedLong(arg);

	if ((us == (unsigned long)-1 && PyErr_Occurred()) || native_enter(self))
		return NULL;
	fprep_client_set_spin(self->client, (unsigned)us);
	native_leave(self);
	Py_RETURN_NONE;
}

static PyObject *Client_conn_lost(PyObject *op, PyObject *unused)
{
	ClientObject *self = (ClientObject *)op;
	uint64_t n;

	(void)unused;
	if (native_enter(self))
		return NULL;
	n = fprep__client_conn_lost(self->client);
	native_leave(self);
	return PyLong_FromUnsignedLongLong(n);
}

/* ---- Pending: a request in flight (fprep_client_submit) ---- */

/* What a pending's done callback needs: the Python callable, called once
 * with the GIL held, then dropped. Freed by the callback: the Pending
 * object may be gone by then. */
struct native_done_box {
	PyObject *callback;
};

typedef struct {
	PyObject_HEAD fprep_pending *p;
	PyObject *client; /* the ClientObject */
} PendingObject;

static PyObject *Pending_type;

static void native_done(fprep_pending *p, void *arg)
{
	struct native_done_box *box = arg;
	PyGILState_STATE g;
	PyObject *r;

	(void)p;
	g = PyGILState_Ensure();
	r = PyObject_CallNoArgs(box->callback);
	if (r == NULL)
		PyErr_WriteUnraisable(box->callback);
	Py_XDECREF(r);
	Py_DECREF(box->callback);
	PyGILState_Release(g);
	free(box);
}

/* Client.submit(request, callback, frame, span, format, ...): an inline
 * FRAME of the first span bytes of frame (bytes or a numpy array, as
 * Client.frame; None for an INFO) sent without waiting (one nng context of its
 * own); callback() is called with the GIL held, from one of nng's threads, when
 * the reply or the failure arrived: Pending.wait() then does not block. The
 * caller keeps the Pending until then (its wait, or its end, waits for the
 * reply); the frame is copied before this returns. A pending may outlive
 * the client's close (it then fails). */
static PyObject *Client_submit(PyObject *op, PyObject *args)
{
	ClientObject *self = (ClientObject *)op;
	struct native_done_box *box;
	PyObject *tmpl, *cb;
	PendingObject *pd;
	struct native_src s;
	fprep_request req;
	const void *addr = NULL;
	int err;

	if (!PyArg_ParseTuple(args, "O!O" NATIVE_SRC_FMT, Request_type, &tmpl,
	                      &cb, NATIVE_SRC_ARGS(s)))
		return NULL;
	req = ((RequestObject *)tmpl)->req;
	if (((RequestObject *)tmpl)->is_register ||
	    (req.kind != FPREP_KIND_FRAME && req.kind != FPREP_KIND_ECHO &&
	     req.kind != FPREP_KIND_INFO))
		return native_raise(
		        FPREP_EINVAL,
		        "submit takes FRAME, ECHO and INFO requests");
	if (req.kind != FPREP_KIND_INFO) {
		if (native_bytes_of(s.src, "frame", s.span, &addr))
			return NULL;
		native_set_source(&req, &s);
		req.input_loc = FPREP_LOC_INLINE;
	}
	pd = PyObject_New(PendingObject, (PyTypeObject *)Pending_type);
	if (pd == NULL)
		return NULL;
	pd->p = NULL;
	Py_INCREF(op);
	pd->client = op;
	box = malloc(sizeof(*box));
	if (box == NULL) {
		Py_DECREF((PyObject *)pd);
		return PyErr_NoMemory();
	}
	Py_INCREF(cb);
	box->callback = cb;
	if (native_enter(self)) {
		Py_DECREF(cb);
		free(box);
		Py_DECREF((PyObject *)pd);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS err = fprep_client_submit(
	        self->client, &req, addr, native_done, box, &pd->p);
	Py_END_ALLOW_THREADS if (err)
	{
		native_fail(self, err);
		native_leave(self);
		Py_DECREF(cb);
		free(box);
		Py_DECREF((PyObject *)pd);
		return NULL;
	}
	native_leave(self);
	return (PyObject *)pd;
}

/* native_pending_end waits for p without the GIL; returns the error and
 * fills *res, and the sentence of a failure in why. */
static int native_pending_end(PendingObject *self, fprep_result *res, char *why,
                              size_t size)
{
	ClientObject *c = (ClientObject *)self->client;
	fprep_pending *p = self->p;
	int err, open;

	self->p = NULL;
	Py_BEGIN_ALLOW_THREADS err = fprep_pending_wait(p, res);
	Py_END_ALLOW_THREADS if (err == 0) return 0;
	if (native_forked(c)) {
		snprintf(why, size, "%s",
		         "this request was sent by the parent process before "
		         "it forked: a child process must open a client of "
		         "its own");
		return err;
	}
	pthread_mutex_lock(&c->mtx);
	open = !c->closed;
	if (open)
		c->calls++;
	pthread_mutex_unlock(&c->mtx);
	snprintf(why, size, "%s",
	         open ? fprep_client_last_error(c->client)
	              : "the client was closed while the request was in "
	                "flight");
	if (open)
		native_leave(c);
	return err;
}

static PyObject *Pending_wait(PyObject *op, PyObject *unused)
{
	PendingObject *self = (PendingObject *)op;
	fprep_result res;
	char why[256];
	int err;

	(void)unused;
	if (self->p == NULL)
		return native_raise(FPREP_EINVAL, "waited for twice");
	err = native_pending_end(self, &res, why, sizeof(why));
	if (err)
		return native_raise(err, why);
	return native_result_new(&res);
}

static void Pending_dealloc(PyObject *op)
{
	PendingObject *self = (PendingObject *)op;
	PyTypeObject *tp = Py_TYPE(op);
	freefunc free_fn = (freefunc)PyType_GetSlot(tp, Py_tp_free);
	fprep_result res;
	char why[256];

	if (self->p != NULL &&
	    native_pending_end(self, &res, why, sizeof(why)) == 0)
		fprep_result_fini(&res);
	Py_XDECREF(self->client);
	free_fn(op);
	Py_DECREF(tp);
}

static PyMethodDef Pending_methods[] = {
        {"wait", Pending_wait, METH_NOARGS,
         "The reply (a Result), once; blocks until it came."},
        {NULL, NULL, 0, NULL}};

static PyType_Slot Pending_slots[] = {
        {Py_tp_dealloc, Pending_dealloc},
        {Py_tp_methods, Pending_methods},
        {Py_tp_doc, "A request in flight (fprep_pending)."},
        {0, NULL}};

static PyType_Spec Pending_spec = {"frameprep._native.Pending",
                                   sizeof(PendingObject), 0, Py_TPFLAGS_DEFAULT,
                                   Pending_slots};

/* ---- Region: shared memory registered with the daemon ---- */

typedef struct {
	PyObject_HEAD fprep_region *r;
	PyObject *client; /* the ClientObject */
	uint64_t lost;    /* the client's lost connections at the open */
	int unregistered;
	/* Region.prepare's requests, by doorbell entry (a ring's slot), or
	 * NULL; nprepared entries, those never prepared have kind 0. */
	fprep_request *prepared;
	unsigned nprepared;
} RegionObject;

static PyObject *Region_type;

static PyObject *Client_region_open(PyObject *op, PyObject *args)
{
	ClientObject *self = (ClientObject *)op;
	unsigned long long size;
	RegionObject *ro;
	fprep_region *r = NULL;
	uint64_t lost;
	int err;

	if (!PyArg_ParseTuple(args, "K", &size))
		return NULL;
	if (native_enter(self))
		return NULL;
	lost = fprep__client_conn_lost(self->client);
	Py_BEGIN_ALLOW_THREADS err =
	        fprep_region_open(&r, self->client, (size_t)size);
	Py_END_ALLOW_THREADS if (err)
	{
		native_fail(self, err);
		native_leave(self);
		return NULL;
	}
	native_leave(self);
	ro = PyObject_New(RegionObject, (PyTypeObject *)Region_type);
	if (ro == NULL) {
		fprep_region_close(r);
		return NULL;
	}
	ro->r = r;
	Py_INCREF(op);
	ro->client = op;
	ro->lost = lost;
	ro->unregistered = 0;
	ro->prepared = NULL;
	ro->nprepared = 0;
	return (PyObject *)ro;
}

/* native_region_client enters r's client, or raises. */
static ClientObject *native_region_client(RegionObject *self)
{
	ClientObject *c = (ClientObject *)self->client;

	if (self->r == NULL) {
		native_raise(FPREP_ECLOSED, "the region was closed");
		return NULL;
	}
	return native_enter(c) ? NULL : c;
}

static PyObject *Region_doorbell(PyObject *op, PyObject *args)
{
	RegionObject *self = (RegionObject *)op;
	unsigned long long offset;
	unsigned entries;
	ClientObject *c;
	int err;

	if (!PyArg_ParseTuple(args, "KI", &offset, &entries))
		return NULL;
	if ((c = native_region_client(self)) == NULL)
		return NULL;
	Py_BEGIN_ALLOW_THREADS err =
	        fprep_region_doorbell(self->r, offset, entries);
	Py_END_ALLOW_THREADS if (err) native_fail(c, err);
	native_leave(c);
	if (err)
		return NULL;
	Py_RETURN_NONE;
}

/* native_region_args parses Region.request's arguments (entry, request,
 * in_offset, out_offset, out_capacity, span, format, width, height,
 * stride, uv_stride, u_offset, v_offset) into the request *req of entry
 * *k in region r. */
static int native_region_args(fprep_region *r, PyObject *args, unsigned *k,
                              fprep_request *req)
{
	unsigned long long in_off, out_off, out_cap;
	PyObject *tmpl;
	struct native_src s;

	s.src = NULL;
	if (!PyArg_ParseTuple(args, "IO!KKKKIIIIIII", k, Request_type, &tmpl,
	                      &in_off, &out_off, &out_cap, &s.span, &s.fmt,
	                      &s.w, &s.h, &s.stride, &s.uvs, &s.uoff, &s.voff))
		return -1;
	*req = ((RequestObject *)tmpl)->req;
	native_set_source(req, &s);
	fprep_request_set_regions(req, r, in_off, r, out_off, out_cap);
	return 0;
}

/* native_region_send runs fprep_region_request of req in entry k without
 * the GIL and returns its Result (the daemon's status unchecked). */
static PyObject *native_region_send(RegionObject *self, unsigned k,
                                    fprep_request *req)
{
	fprep_result res;
	ClientObject *c;
	int err;

	if ((c = native_region_client(self)) == NULL)
		return NULL;
	Py_BEGIN_ALLOW_THREADS err =
	        fprep_region_request(self->r, k, req, &res);
	Py_END_ALLOW_THREADS if (err)
	{
		native_fail(c, err);
		native_leave(c);
		return NULL;
	}
	native_leave(c);
	return native_result_new(&res);
}

/* Region.request(entry, request, in_offset, out_offset, out_capacity,
 * span, format, width, height, stride, uv_stride, u_offset, v_offset):
 * the request's options for a frame and a tensor in this region
 * (fprep_region_request). */
static PyObject *Region_request(PyObject *op, PyObject *args)
{
	RegionObject *self = (RegionObject *)op;
	fprep_request req;
	unsigned k;

	if (self->r == NULL)
		return native_raise(FPREP_ECLOSED, "the region was closed");
	if (native_region_args(self->r, args, &k, &req))
		return NULL;
	return native_region_send(self, k, &req);
}

/* Region.prepare(entry, request, ...): keeps the request that
 * Region.request would send with these arguments, for Region.send(entry):
 * a ring's request for a slot's whole frame, made once per registration.
 * Entries up to 4096. */
static PyObject *Region_prepare(PyObject *op, PyObject *args)
{
	RegionObject *self = (RegionObject *)op;
	fprep_request req;
	unsigned k;

	if (self->r == NULL)
		return native_raise(FPREP_ECLOSED, "the region was closed");
	if (native_region_args(self->r, args, &k, &req))
		return NULL;
	if (k >= 4096)
		return native_raise(FPREP_EINVAL, "entry beyond 4096");
	if (k >= self->nprepared) {
		fprep_request *p =
		        realloc(self->prepared, (k + 1) * sizeof(*p));

		if (p == NULL)
			return PyErr_NoMemory();
		memset(p + self->nprepared, 0,
		       (k + 1 - self->nprepared) * sizeof(*p));
		self->prepared = p;
		self->nprepared = k + 1;
	}
	self->prepared[k] = req;
	Py_RETURN_NONE;
}

/* Region.send(entry): the request Region.prepare kept for entry. */
static PyObject *Region_send(PyObject *op, PyObject *arg)
{
	RegionObject *self = (RegionObject *)op;
	unsigned long k = PyLong_AsUnsignedLong(arg);
	fprep_request req;

	if (k == (unsigned long)-1 && PyErr_Occurred())
		return NULL;
	if (k >= self->nprepared || self->prepared[k].kind == 0)
		return native_raise(FPREP_EINVAL, "entry not prepared");
	req = self->prepared[k];
	return native_region_send(self, (unsigned)k, &req);
}

static PyObject *Region_unregister(PyObject *op, PyObject *unused)
{
	RegionObject *self = (RegionObject *)op;
	ClientObject *c;

	(void)unused;
	if (self->r == NULL || self->unregistered)
		Py_RETURN_NONE;
	self->unregistered = 1;
	c = (ClientObject *)self->client;
	if (native_forked(c)) /* the parent's, still registered there */
		Py_RETURN_NONE;
	pthread_mutex_lock(&c->mtx);
	if (c->closed) { /* the connection's end dropped it */
		pthread_mutex_unlock(&c->mtx);
		Py_RETURN_NONE;
	}
	c->calls++;
	pthread_mutex_unlock(&c->mtx);
	Py_BEGIN_ALLOW_THREADS fprep_region_unregister(self->r);
	Py_END_ALLOW_THREADS native_leave(c);
	Py_RETURN_NONE;
}

static void Region_dealloc(PyObject *op)
{
	RegionObject *self = (RegionObject *)op;
	PyTypeObject *tp = Py_TYPE(op);
	freefunc free_fn = (freefunc)PyType_GetSlot(tp, Py_tp_free);
	ClientObject *c = (ClientObject *)self->client;

	if (self->r != NULL && native_forked(c)) {
		fprep__region_unmap(self->r); /* the child's mapping only */
		self->r = NULL;
	}
	if (self->r != NULL) {
		int open;

		pthread_mutex_lock(&c->mtx);
		open = !c->closed;
		if (open)
			c->calls++;
		pthread_mutex_unlock(&c->mtx);
		if (open) {
			Py_BEGIN_ALLOW_THREADS fprep_region_close(self->r);
			Py_END_ALLOW_THREADS native_leave(c);
		} else {
			fprep__region_unmap(self->r);
		}
		self->r = NULL;
	}
	free(self->prepared);
	Py_XDECREF(self->client);
	free_fn(op);
	Py_DECREF(tp);
}

static PyObject *Region_get_base(PyObject *op, void *c)
{
	(void)c;
	return PyLong_FromUnsignedLongLong(
	        (uintptr_t)fprep_region_base(((RegionObject *)op)->r));
}

static PyObject *Region_get_size(PyObject *op, void *c)
{
	(void)c;
	return PyLong_FromSize_t(fprep_region_size(((RegionObject *)op)->r));
}

static PyObject *Region_get_id(PyObject *op, void *c)
{
	(void)c;
	return PyLong_FromUnsignedLong(
	        fprep_region_id(((RegionObject *)op)->r));
}

static PyObject *Region_get_lost(PyObject *op, void *c)
{
	(void)c;
	return PyLong_FromUnsignedLongLong(((RegionObject *)op)->lost);
}

/* Region.__array_interface__: the whole mapping, bytes. */
static PyObject *Region_get_array(PyObject *op, void *c)
{
	fprep_region *r = ((RegionObject *)op)->r;

	(void)c;
	return Py_BuildValue(
	        "{s:(KO),s:(n),s:s,s:i}", "data",
	        (unsigned long long)(uintptr_t)fprep_region_base(r), Py_False,
	        "shape", (Py_ssize_t)fprep_region_size(r), "typestr", "|u1",
	        "version", 3);
}

static PyGetSetDef Region_getset[] = {
        {"base", Region_get_base, NULL, "Address of the mapping.", NULL},
        {"size", Region_get_size, NULL, "Bytes.", NULL},
        {"id", Region_get_id, NULL, "The daemon's id of the region.", NULL},
        {"lost", Region_get_lost, NULL,
         "Client.conn_lost() when the region was opened.", NULL},
        {"__array_interface__", Region_get_array, NULL, "The mapping.", NULL},
        {NULL, NULL, NULL, NULL, NULL}};

static PyMethodDef Region_methods[] = {
        {"doorbell", Region_doorbell, METH_VARARGS,
         "doorbell(offset, entries): fprep_region_doorbell."},
        {"request", Region_request, METH_VARARGS,
         "A FRAME of a request's options in this region."},
        {"prepare", Region_prepare, METH_VARARGS,
         "prepare(entry, request, ...): keeps request's arguments for send."},
        {"send", Region_send, METH_O,
         "send(entry): the request that prepare kept for entry."},
        {"unregister", Region_unregister, METH_NOARGS,
         "Tells the daemon to drop the region; the mapping stays."},
        {NULL, NULL, 0, NULL}};

static PyType_Slot Region_slots[] = {
        {Py_tp_dealloc, Region_dealloc},
        {Py_tp_getset, Region_getset},
        {Py_tp_methods, Region_methods},
        {Py_tp_doc, "A shared-memory region (fprep_region)."},
        {0, NULL}};

static PyType_Spec Region_spec = {"frameprep._native.Region",
                                  sizeof(RegionObject), 0, Py_TPFLAGS_DEFAULT,
                                  Region_slots};

static PyMethodDef Client_methods[] = {
        {"close", Client_close, METH_NOARGS,
         "Closes the client once the calls in progress ended."},
        {"frame", Client_frame, METH_VARARGS,
         "An inline FRAME (staged through shared memory on ipc://)."},
        {"request", Client_request, METH_VARARGS, "Any request."},
        {"submit", Client_submit, METH_VARARGS,
         "An inline FRAME without waiting; returns a Pending."},
        {"info", Client_info, METH_NOARGS, "The INFO reply."},
        {"elements", Client_elements, METH_VARARGS,
         "One inline ROIS or BATCH request (fprep_client_elements)."},
        {"set_staging", Client_set_staging, METH_O,
         "fprep_client_set_staging."},
        {"set_spin", Client_set_spin, METH_O, "fprep_client_set_spin."},
        {"conn_lost", Client_conn_lost, METH_NOARGS,
         "Connections to the daemon lost so far."},
        {"region_open", Client_region_open, METH_VARARGS,
         "region_open(size): a shared-memory Region."},
        {NULL, NULL, 0, NULL}};

static PyType_Slot Client_slots[] = {
        {Py_tp_new, Client_new},
        {Py_tp_init, Client_init},
        {Py_tp_dealloc, Client_dealloc},
        {Py_tp_methods, Client_methods},
        {Py_tp_doc, "Client(url, timeout_ms, trust_owner): fprep_client."},
        {0, NULL}};

static PyType_Spec Client_spec = {"frameprep._native.Client",
                                  sizeof(ClientObject), 0, Py_TPFLAGS_DEFAULT,
                                  Client_slots};

/* native_after sets *t to the monotonic clock's time seconds from now. */
static void native_after(struct timespec *t, double seconds)
{
	clock_gettime(CLOCK_MONOTONIC, t);
	t->tv_sec += (time_t)seconds;
	t->tv_nsec += (long)((seconds - (double)(time_t)seconds) * 1e9);
	if (t->tv_nsec >= 1000000000L) {
		t->tv_sec++;
		t->tv_nsec -= 1000000000L;
	}
}

/* native_sync_init makes mtx and cv, cv timed on the monotonic clock (as
 * native_after's times are). */
static void native_sync_init(pthread_mutex_t *mtx, pthread_cond_t *cv)
{
	pthread_condattr_t a;

	pthread_mutex_init(mtx, NULL);
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(cv, &a);
	pthread_condattr_destroy(&a);
}

/* native_wait waits on cv (of mtx) up to timeout seconds, GIL released,
 * in slices of 100 ms between which signal handlers run (a
 * KeyboardInterrupt) as in a Python wait, until take(arg), called with
 * mtx held, returns non-zero. Returns what take returned, 0 when the time
 * ran out, or NATIVE_WAIT_RAISED when a signal's handler raised (its
 * error set). */
#define NATIVE_WAIT_RAISED (-100)
static int native_wait(pthread_mutex_t *mtx, pthread_cond_t *cv, double timeout,
                       int (*take)(void *), void *arg)
{
	struct timespec end;
	int got = 0, more = 1;

	native_after(&end, timeout);
	while (more && PyErr_CheckSignals() == 0) {
		Py_BEGIN_ALLOW_THREADS struct timespec slice;
		int last;

		native_after(&slice, 0.1);
		last = slice.tv_sec > end.tv_sec ||
		       (slice.tv_sec == end.tv_sec &&
		        slice.tv_nsec >= end.tv_nsec);
		if (last)
			slice = end;
		pthread_mutex_lock(mtx);
		while ((got = take(arg)) == 0)
			if (pthread_cond_timedwait(cv, mtx, &slice) != 0) {
				got = take(arg);
				break;
			}
		pthread_mutex_unlock(mtx);
		more = got == 0 && !last;
		Py_END_ALLOW_THREADS
	}
	return more ? NATIVE_WAIT_RAISED : got;
}

/* ---- Gate: the tokens of a cap on one connection's requests in flight
 * (the daemon's max_inflight_per_conn) ----
 *
 * Client calls take a token before a request and give it back after its
 * reply; Slots.send takes and gives them in C, without a Python call. */

typedef struct {
	PyObject_HEAD pthread_mutex_t mtx;
	pthread_cond_t cv; /* a token came back */
	long tokens;       /* free now */
} GateObject;

static PyObject *Gate_type;

/* native_gate_token takes a token of g (a GateObject, its mtx held) if
 * one is free: 1, else 0. */
static int native_gate_token(void *g_)
{
	GateObject *g = g_;

	if (g->tokens == 0)
		return 0;
	g->tokens--;
	return 1;
}

/* native_gate_try takes a token if one is free at once: 1, else 0. */
static int native_gate_try(GateObject *g)
{
	int ok;

	pthread_mutex_lock(&g->mtx);
	ok = native_gate_token(g);
	pthread_mutex_unlock(&g->mtx);
	return ok;
}

/* native_gate_give gives a token back and wakes one waiter. */
static void native_gate_give(GateObject *g)
{
	pthread_mutex_lock(&g->mtx);
	g->tokens++;
	pthread_cond_signal(&g->cv);
	pthread_mutex_unlock(&g->mtx);
}

static PyObject *Gate_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	GateObject *self;
	long n;

	(void)kw;
	if (!PyArg_ParseTuple(args, "l", &n))
		return NULL;
	if (n < 1)
		return native_raise(FPREP_EINVAL,
		                    "a gate needs 1 or more tokens");
	self = (GateObject *)((allocfunc)PyType_GetSlot(type, Py_tp_alloc))(
	        type, 0);
	if (self == NULL)
		return NULL;
	native_sync_init(&self->mtx, &self->cv);
	self->tokens = n;
	return (PyObject *)self;
}

static void Gate_dealloc(PyObject *op)
{
	GateObject *self = (GateObject *)op;
	PyTypeObject *tp = Py_TYPE(op);
	freefunc free_fn = (freefunc)PyType_GetSlot(tp, Py_tp_free);

	pthread_cond_destroy(&self->cv);
	pthread_mutex_destroy(&self->mtx);
	free_fn(op);
	Py_DECREF(tp);
}

/* Gate.take(timeout): takes a token, waiting up to timeout seconds (GIL
 * released, in slices of 100 ms between which signal handlers run);
 * returns whether it got one. */
static PyObject *Gate_take(PyObject *op, PyObject *arg)
{
	GateObject *self = (GateObject *)op;
	double timeout = PyFloat_AsDouble(arg);
	int got;

	if (timeout == -1.0 && PyErr_Occurred())
		return NULL;
	got = native_gate_try(self);
	if (!got && timeout > 0)
		got = native_wait(&self->mtx, &self->cv, timeout,
		                  native_gate_token, self);
	if (got == NATIVE_WAIT_RAISED)
		return NULL;
	return PyBool_FromLong(got);
}

static PyObject *Gate_try_take(PyObject *op, PyObject *unused)
{
	(void)unused;
	return PyBool_FromLong(native_gate_try((GateObject *)op));
}

static PyObject *Gate_give(PyObject *op, PyObject *unused)
{
	(void)unused;
	native_gate_give((GateObject *)op);
	Py_RETURN_NONE;
}

static PyObject *Gate_get_tokens(PyObject *op, void *c)
{
	GateObject *self = (GateObject *)op;
	long n;

	(void)c;
	pthread_mutex_lock(&self->mtx);
	n = self->tokens;
	pthread_mutex_unlock(&self->mtx);
	return PyLong_FromLong(n);
}

static PyMethodDef Gate_methods[] = {
        {"take", Gate_take, METH_O,
         "take(timeout_s) -> bool: takes a token, waiting up to timeout_s."},
        {"try_take", Gate_try_take, METH_NOARGS,
         "try_take() -> bool: takes a token if one is free at once."},
        {"give", Gate_give, METH_NOARGS, "Gives a token back."},
        {NULL, NULL, 0, NULL}};

static PyGetSetDef Gate_getset[] = {
        {"tokens", Gate_get_tokens, NULL, "Tokens free now.", NULL},
        {NULL, NULL, NULL, NULL, NULL}};

static PyType_Slot Gate_slots[] = {
        {Py_tp_new, Gate_new},
        {Py_tp_dealloc, Gate_dealloc},
        {Py_tp_methods, Gate_methods},
        {Py_tp_getset, Gate_getset},
        {Py_tp_doc, "Gate(n): n tokens, the cap on a connection's requests "
                    "in flight (thread-safe)."},
        {0, NULL}};

static PyType_Spec Gate_spec = {"frameprep._native.Gate", sizeof(GateObject), 0,
                                Py_TPFLAGS_DEFAULT, Gate_slots};

/* ---- Slots and Hold: a ring's slot table and what holds a slot ---- */

/* A slot is free, reserved (a frame handed out by next_frame, not yet
 * sent), taken (in flight) or held (by its result, or by numpy views of
 * the result's tensor, until the last of them is gone). A reserved or
 * held slot's holder is the thread that reserved it or made the result:
 * a thread that asks for a slot while every slot is reserved or held by
 * itself would wait for ever, and is told at once instead. */
enum { SLOT_FREE, SLOT_RESERVED, SLOT_TAKEN, SLOT_HELD };

/* The array a Hold describes to numpy (__array_struct__: numpy's
 * PyArrayInterface, whose layout is numpy's stable interface). */
struct native_array_iface {
	int two; /* 2 */
	int nd;
	char typekind;
	int itemsize;
	int flags;
	Py_intptr_t *shape;
	Py_intptr_t *strides;
	void *data;
	PyObject *descr;
};

/* NPY_ARRAY_C_CONTIGUOUS, ALIGNED, NOTSWAPPED and WRITEABLE. */
#define NATIVE_ARRAY_FLAGS (0x1 | 0x100 | 0x200 | 0x400)

typedef struct {
	PyObject_HEAD pthread_mutex_t mtx;
	pthread_cond_t cv; /* a slot came free, or the table closed */
	unsigned n;
	uint8_t *state;
	uint64_t *ticket;      /* changes each time the slot is handed out */
	unsigned long *holder; /* the thread that reserved or holds it */
	unsigned *fifo;        /* the free slots, least recently freed first */
	unsigned head, count;
	int closed;
	PyObject *on_free; /* called (GIL held) when a slot came free */
	/* The layout (Slots.layout): a slot's bytes, its frame's offset, the
	 * frame's and the tensor's shapes and the tensor's type. */
	unsigned long long slot_bytes, frame_off;
	int frame_nd, tensor_nd;
	Py_intptr_t frame_shape[4], tensor_shape[4];
	char typekind;
	int itemsize;
	/* The registration that next_frame and send use (Slots.arm; GIL
	 * held): its mapping object, Region, _Socket and the limits its
	 * frames were checked against, the connection's Gate (NULL: no
	 * gate), a whole frame's source width and height; arm_map NULL
	 * while disarmed. arm_gen changes at every arm and disarm. */
	PyObject *arm_map, *arm_region, *arm_sock, *arm_limits;
	PyObject *arm_gate, *arm_width, *arm_height;
	unsigned long long arm_base;
	uint64_t arm_gen;
	uint64_t handed_back; /* Slots.send's (slot, ticket, hold) returns */
} SlotsObject;

typedef struct {
	PyObject_HEAD PyObject *slots; /* the SlotsObject; NULL once given
	                                  back or sent */
	PyObject *owner;               /* the Python ring */
	PyObject *map;                 /* the ring's mapping object */
	PyObject *region;              /* the Region: keeps the mapping */
	unsigned long long cap; /* bytes from ai.data to the area's end */
	unsigned slot;
	uint64_t ticket;
	int what;     /* 0: a reserved frame, 1: a result's tensor */
	int released; /* its result was released: the slot goes back, without
	                 a warning, when the last array viewing it is gone */
	struct native_array_iface ai;
	Py_intptr_t shape[4], strides[4];
} HoldObject;

static PyObject *Slots_type, *Hold_type;
static PyObject *RingResultCore_type; /* (below) */

static PyObject *Slots_new(PyTypeObject *tp, PyObject *args, PyObject *kw)
{
	allocfunc alloc = (allocfunc)PyType_GetSlot(tp, Py_tp_alloc);
	SlotsObject *self;
	unsigned n;

	(void)kw;
	if (!PyArg_ParseTuple(args, "I", &n))
		return NULL;
	if (n < 1)
		return native_raise(FPREP_EINVAL, "a ring needs a slot");
	self = (SlotsObject *)alloc(tp, 0);
	if (self == NULL)
		return NULL;
	native_sync_init(&self->mtx, &self->cv);
	self->n = n;
	self->state = calloc(n, 1);
	self->ticket = calloc(n, sizeof(*self->ticket));
	self->holder = calloc(n, sizeof(*self->holder));
	self->fifo = calloc(n, sizeof(*self->fifo));
	if (self->state == NULL || self->ticket == NULL ||
	    self->holder == NULL || self->fifo == NULL) {
		Py_DECREF((PyObject *)self);
		return PyErr_NoMemory();
	}
	for (unsigned k = 0; k < n; k++)
		self->fifo[k] = k;
	self->head = 0;
	self->count = n;
	return (PyObject *)self;
}

static void native_disarm(SlotsObject *self);

static void Slots_dealloc(PyObject *op)
{
	SlotsObject *self = (SlotsObject *)op;
	PyTypeObject *tp = Py_TYPE(op);
	freefunc free_fn = (freefunc)PyType_GetSlot(tp, Py_tp_free);

	pthread_cond_destroy(&self->cv);
	pthread_mutex_destroy(&self->mtx);
	free(self->state);
	free(self->ticket);
	free(self->holder);
	free(self->fifo);
	Py_XDECREF(self->on_free);
	native_disarm(self);
	free_fn(op);
	Py_DECREF(tp);
}

static int native_shape(PyObject *t, Py_intptr_t *shape, int *nd)
{
	Py_ssize_t n = PyTuple_Check(t) ? PyTuple_Size(t) : -1;

	if (n < 1 || n > 4) {
		PyErr_SetString(PyExc_ValueError, "a shape of 1 to 4 ints");
		return -1;
	}
	for (Py_ssize_t i = 0; i < n; i++) {
		Py_ssize_t v = PyLong_AsSsize_t(PyTuple_GetItem(t, i));

		if (v < 0) {
			if (!PyErr_Occurred())
				PyErr_SetString(PyExc_ValueError,
				                "a negative dimension");
			return -1;
		}
		shape[i] = v;
	}
	*nd = (int)n;
	return 0;
}

/* native_shape_bytes sets *bytes to the bytes of nd dimensions of shape
 * of itemsize each: 0, or -1 on overflow. */
static int native_shape_bytes(const Py_intptr_t *shape, int nd,
                              unsigned long long itemsize,
                              unsigned long long *bytes)
{
	unsigned long long n = itemsize;

	for (int i = 0; i < nd; i++)
		if (__builtin_mul_overflow(n, (unsigned long long)shape[i], &n))
			return -1;
	*bytes = n;
	return 0;
}

/* native_slots_fit checks that the slot table's n slots of its layout lie
 * inside region (the Region the frames and tensors are viewed in):
 * ValueError when they do not, ECLOSED for a closed region, EINVAL before
 * layout(). Returns 0 or -1. */
static int native_slots_fit(const SlotsObject *self, PyObject *region)
{
	fprep_region *r = ((RegionObject *)region)->r;
	unsigned long long all;

	if (r == NULL) {
		native_raise(FPREP_ECLOSED, "the region was closed");
		return -1;
	}
	if (self->slot_bytes == 0) {
		native_raise(FPREP_EINVAL, "the slot table has no layout");
		return -1;
	}
	if (__builtin_mul_overflow(self->slot_bytes,
	                           (unsigned long long)self->n, &all) ||
	    all > fprep_region_size(r)) {
		PyErr_Format(PyExc_ValueError,
		             "%u slots of %llu bytes do not fit the region of "
		             "%zu bytes",
		             self->n, self->slot_bytes, fprep_region_size(r));
		return -1;
	}
	return 0;
}

/* Slots.layout(slot_bytes, frame_offset, frame_shape, tensor_shape,
 * typekind, itemsize, on_free): where a slot's frame and tensor lie (the
 * tensor, of typekind and itemsize 'u' 1, 'f' 4 or 'f' 2, at the slot's
 * start and within frame_offset; the uint8 frame from frame_offset to
 * within slot_bytes: ValueError otherwise), and what to call (GIL held,
 * any thread; None: nothing) when a slot comes free. Not while armed. */
static PyObject *Slots_layout(PyObject *op, PyObject *args)
{
	SlotsObject *self = (SlotsObject *)op;
	unsigned long long slot_bytes, frame_off, fbytes, tbytes;
	Py_intptr_t fshape[4], tshape[4];
	int kind, itemsize, fnd, tnd;
	PyObject *fs, *ts, *cb, *old;

	if (!PyArg_ParseTuple(args, "KKO!O!CiO", &slot_bytes, &frame_off,
	                      &PyTuple_Type, &fs, &PyTuple_Type, &ts, &kind,
	                      &itemsize, &cb))
		return NULL;
	if (native_shape(fs, fshape, &fnd) || native_shape(ts, tshape, &tnd))
		return NULL;
	if (!((kind == 'u' && itemsize == 1) ||
	      (kind == 'f' && (itemsize == 4 || itemsize == 2)))) {
		PyErr_Format(PyExc_ValueError,
		             "layout: tensor type %c%d is not u1, f4 or f2",
		             kind > 32 && kind < 127 ? kind : '?', itemsize);
		return NULL;
	}
	if (native_shape_bytes(fshape, fnd, 1, &fbytes) ||
	    native_shape_bytes(tshape, tnd, (unsigned long long)itemsize,
	                       &tbytes) ||
	    slot_bytes == 0 || frame_off > slot_bytes ||
	    fbytes > slot_bytes - frame_off || tbytes > frame_off) {
		PyErr_Format(PyExc_ValueError,
		             "layout: a slot of %llu bytes does not hold the "
		             "tensor before offset %llu and the frame from "
		             "there",
		             slot_bytes, frame_off);
		return NULL;
	}
	if (self->arm_map != NULL) {
		PyErr_SetString(PyExc_ValueError,
		                "layout: not while the slot table is armed");
		return NULL;
	}
	self->slot_bytes = slot_bytes;
	self->frame_off = frame_off;
	memcpy(self->frame_shape, fshape, sizeof(fshape));
	memcpy(self->tensor_shape, tshape, sizeof(tshape));
	self->frame_nd = fnd;
	self->tensor_nd = tnd;
	self->typekind = (char)kind;
	self->itemsize = itemsize;
	old = self->on_free;
	if (cb == Py_None) {
		self->on_free = NULL;
	} else {
		Py_INCREF(cb);
		self->on_free = cb;
	}
	Py_XDECREF(old);
	Py_RETURN_NONE;
}

/* native_pop takes the least recently freed slot for the calling thread
 * (mtx held). */
static unsigned native_pop(SlotsObject *self, int state, uint64_t *ticket)
{
	unsigned k = self->fifo[self->head];

	self->head = (self->head + 1) % self->n;
	self->count--;
	self->state[k] = (uint8_t)state;
	self->holder[k] = PyThread_get_thread_ident();
	*ticket = ++self->ticket[k];
	return k;
}

/* native_all_mine: whether every slot is reserved or held by thread me,
 * none free or in flight: then no slot can come free while me waits
 * (mtx held). */
static int native_all_mine(const SlotsObject *self, unsigned long me)
{
	for (unsigned k = 0; k < self->n; k++)
		if ((self->state[k] != SLOT_RESERVED &&
		     self->state[k] != SLOT_HELD) ||
		    self->holder[k] != me)
			return 0;
	return 1;
}

/* native_free frees slot k when it is still handed out with ticket (and,
 * when only_reserved, reserved); returns whether it did (mtx not held). */
static int native_free(SlotsObject *self, unsigned k, uint64_t ticket,
                       int only_reserved)
{
	int freed = 0;

	pthread_mutex_lock(&self->mtx);
	if (k < self->n && self->ticket[k] == ticket &&
	    self->state[k] != SLOT_FREE &&
	    (!only_reserved || self->state[k] == SLOT_RESERVED)) {
		self->state[k] = SLOT_FREE;
		self->fifo[(self->head + self->count) % self->n] = k;
		self->count++;
		freed = 1;
		pthread_cond_signal(&self->cv);
	}
	pthread_mutex_unlock(&self->mtx);
	return freed;
}

/* native_freed calls on_free after a slot came free (GIL held; an
 * exception being raised is kept aside meanwhile: Python code must not
 * run with one set). */
static void native_freed(SlotsObject *self)
{
	PyObject *r, *et, *ev, *tb;

	if (self->on_free == NULL)
		return;
	PyErr_Fetch(&et, &ev, &tb);
	r = PyObject_CallNoArgs(self->on_free);
	if (r == NULL)
		PyErr_WriteUnraisable(self->on_free);
	Py_XDECREF(r);
	PyErr_Restore(et, ev, tb);
}

/* native_slot_take is native_wait's take for Slots.take: a free slot of
 * t->self (its mtx held) into t->k and t->ticket in state t->state: 1;
 * -1 when the table is closed; -2 when t->mine and every slot is
 * reserved or held by thread t->me; else 0. */
struct native_slot_take {
	SlotsObject *self;
	int state, mine;
	unsigned long me;
	unsigned k;
	uint64_t ticket;
};

static int native_slot_take(void *t_)
{
	struct native_slot_take *t = t_;

	if (t->self->closed)
		return -1;
	if (t->self->count == 0)
		return t->mine && native_all_mine(t->self, t->me) ? -2 : 0;
	t->k = native_pop(t->self, t->state, &t->ticket);
	return 1;
}

/* Slots.take(state, timeout_s, mine=True): takes the least recently
 * freed slot in state (1 reserved, 2 taken): (slot, ticket), waiting up
 * to timeout_s (GIL released) for one; None when none came; False at
 * once, with mine, when every slot is reserved or held by the calling
 * thread (none free, none in flight: none would come). ClosedError once
 * closed. */
static PyObject *Slots_take(PyObject *op, PyObject *args)
{
	SlotsObject *self = (SlotsObject *)op;
	struct native_slot_take t = {.self = self, .mine = 1};
	double timeout;
	int got;

	if (!PyArg_ParseTuple(args, "id|p", &t.state, &timeout, &t.mine))
		return NULL;
	t.me = PyThread_get_thread_ident();
	if (t.state != SLOT_RESERVED && t.state != SLOT_TAKEN)
		return native_raise(FPREP_EINVAL, "no such slot state");
	pthread_mutex_lock(&self->mtx);
	got = native_slot_take(&t);
	pthread_mutex_unlock(&self->mtx);
	if (got == 0 && timeout > 0)
		got = native_wait(&self->mtx, &self->cv, timeout,
		                  native_slot_take, &t);
	if (got == NATIVE_WAIT_RAISED)
		return NULL;
	if (got == -2)
		Py_RETURN_FALSE;
	if (got < 0)
		return native_raise(FPREP_ECLOSED, "the ring was closed");
	if (got == 0)
		Py_RETURN_NONE;
	return Py_BuildValue("(IK)", t.k, (unsigned long long)t.ticket);
}

/* Slots.release(slot, ticket): gives slot back unless it was since (its
 * ticket changed); returns whether it did. */
static PyObject *Slots_release(PyObject *op, PyObject *args)
{
	SlotsObject *self = (SlotsObject *)op;
	unsigned long long ticket;
	unsigned k;
	int freed;

	if (!PyArg_ParseTuple(args, "IK", &k, &ticket))
		return NULL;
	freed = native_free(self, k, ticket, 0);
	if (freed)
		native_freed(self);
	return PyBool_FromLong(freed);
}

/* Slots.close(): no slot is handed out any more; waiters raise
 * ClosedError. */
static PyObject *Slots_close(PyObject *op, PyObject *unused)
{
	SlotsObject *self = (SlotsObject *)op;

	(void)unused;
	pthread_mutex_lock(&self->mtx);
	self->closed = 1;
	pthread_cond_broadcast(&self->cv);
	pthread_mutex_unlock(&self->mtx);
	native_disarm(self);
	Py_RETURN_NONE;
}

/* Slots.states(): each slot's (state, ticket): 0 free, 1 reserved, 2 in
 * flight, 3 held. */
static PyObject *Slots_states(PyObject *op, PyObject *unused)
{
	SlotsObject *self = (SlotsObject *)op;
	PyObject *out;
	uint8_t *st;
	uint64_t *tk;

	(void)unused;
	st = malloc(self->n);
	tk = malloc(self->n * sizeof(*tk));
	if (st == NULL || tk == NULL) {
		free(st);
		free(tk);
		return PyErr_NoMemory();
	}
	pthread_mutex_lock(&self->mtx);
	memcpy(st, self->state, self->n);
	memcpy(tk, self->ticket, self->n * sizeof(*tk));
	pthread_mutex_unlock(&self->mtx);
	out = PyTuple_New(self->n);
	for (unsigned k = 0; out != NULL && k < self->n; k++) {
		PyObject *v =
		        Py_BuildValue("(iK)", st[k], (unsigned long long)tk[k]);

		if (v == NULL) {
			Py_CLEAR(out);
			break;
		}
		PyTuple_SetItem(out, k, v);
	}
	free(st);
	free(tk);
	return out;
}

/* Slots.free(): the free slots, least recently freed first. */
static PyObject *Slots_free(PyObject *op, PyObject *unused)
{
	SlotsObject *self = (SlotsObject *)op;
	unsigned ks[4096], n, i;
	PyObject *list;

	(void)unused;
	pthread_mutex_lock(&self->mtx);
	n = self->count < 4096 ? self->count : 4096;
	for (i = 0; i < n; i++)
		ks[i] = self->fifo[(self->head + i) % self->n];
	pthread_mutex_unlock(&self->mtx);
	list = PyList_New(n);
	for (i = 0; list != NULL && i < n; i++) {
		PyObject *v = PyLong_FromUnsignedLong(ks[i]);

		if (v == NULL) {
			Py_CLEAR(list);
			break;
		}
		PyList_SetItem(list, i, v);
	}
	return list;
}

/* native_set_shape describes h's memory as nd dimensions of shape, packed
 * (C order). */
static void native_set_shape(HoldObject *h, const Py_intptr_t *shape, int nd)
{
	Py_intptr_t step = h->ai.itemsize;

	h->ai.nd = nd;
	for (int i = nd - 1; i >= 0; i--) {
		h->shape[i] = shape[i];
		h->strides[i] = step;
		step *= shape[i];
	}
}

/* native_hold_new makes the holder of slot k (ticket) of ring owner in
 * the mapping map of region (a Region that native_slots_fit accepted for
 * this layout, and k < n): of its frame (what 0) or its tensor (what 1).
 * On failure the slot is given back. */
static HoldObject *native_hold_new(SlotsObject *self, unsigned k,
                                   uint64_t ticket, PyObject *owner,
                                   PyObject *map, PyObject *region, int what)
{
	uint8_t *slot =
	        (uint8_t *)fprep_region_base(((RegionObject *)region)->r) +
	        (size_t)k * self->slot_bytes;
	HoldObject *h;
	int nd;
	const Py_intptr_t *shape;

	h = PyObject_New(HoldObject, (PyTypeObject *)Hold_type);
	if (h == NULL) {
		if (native_free(self, k, ticket, 0))
			native_freed(self);
		return NULL;
	}
	Py_INCREF((PyObject *)self);
	h->slots = (PyObject *)self;
	Py_INCREF(owner);
	h->owner = owner;
	Py_INCREF(map);
	h->map = map;
	Py_INCREF(region);
	h->region = region;
	h->slot = k;
	h->ticket = ticket;
	h->what = what;
	h->released = 0;
	if (what == 1) { /* in flight until now: held by this thread */
		pthread_mutex_lock(&self->mtx);
		if (self->ticket[k] == ticket && self->state[k] == SLOT_TAKEN) {
			self->state[k] = SLOT_HELD;
			self->holder[k] = PyThread_get_thread_ident();
		}
		pthread_mutex_unlock(&self->mtx);
	}
	h->ai.two = 2;
	h->ai.flags = NATIVE_ARRAY_FLAGS;
	h->ai.shape = h->shape;
	h->ai.strides = h->strides;
	h->ai.descr = NULL;
	if (what == 0) {
		h->ai.typekind = 'u';
		h->ai.itemsize = 1;
		nd = self->frame_nd;
		shape = self->frame_shape;
		h->ai.data = slot + self->frame_off;
		h->cap = self->slot_bytes - self->frame_off;
	} else {
		h->ai.typekind = self->typekind;
		h->ai.itemsize = self->itemsize;
		nd = self->tensor_nd;
		shape = self->tensor_shape;
		h->ai.data = slot;
		h->cap = self->frame_off;
	}
	native_set_shape(h, shape, nd);
	return h;
}

/* native_hold parses (slot, ticket, ring, map, region) for
 * native_hold_new, checking slot against the table and the table against
 * region. */
static PyObject *native_hold(SlotsObject *self, PyObject *args, int what)
{
	unsigned long long ticket;
	PyObject *owner, *map, *region;
	unsigned k;

	if (!PyArg_ParseTuple(args, "IKOOO!", &k, &ticket, &owner, &map,
	                      Region_type, &region))
		return NULL;
	if (k >= self->n) {
		PyErr_Format(PyExc_IndexError,
		             "slot %u: the table has %u slots", k, self->n);
		return NULL;
	}
	if (native_slots_fit(self, region))
		return NULL;
	return (PyObject *)native_hold_new(self, k, ticket, owner, map, region,
	                                   what);
}

/* Slots.frame_hold(slot, ticket, ring, map, region): the holder of slot's
 * frame (reserved by take(1, ...)), in the Region region (the mapping
 * that map, the ring's object for it, stands for). IndexError for a slot
 * beyond the table, ValueError for a table that does not fit region. */
static PyObject *Slots_frame_hold(PyObject *op, PyObject *args)
{
	return native_hold((SlotsObject *)op, args, 0);
}

/* Slots.result_hold(slot, ticket, ring, map, region): the holder of
 * slot's tensor (as frame_hold). */
static PyObject *Slots_result_hold(PyObject *op, PyObject *args)
{
	return native_hold((SlotsObject *)op, args, 1);
}

/* Slots.claim(hold): whether hold is a frame reserved on this table and
 * not yet sent: its slot is then taken (in flight), no more the
 * holder's. */
static PyObject *Slots_claim(PyObject *op, PyObject *arg)
{
	SlotsObject *self = (SlotsObject *)op;
	HoldObject *h = (HoldObject *)arg;
	int ok = 0;

	if (Py_TYPE(arg) != (PyTypeObject *)Hold_type || h->slots != op)
		Py_RETURN_FALSE;
	pthread_mutex_lock(&self->mtx);
	if (!self->closed && h->slots == op && h->slot < self->n &&
	    self->ticket[h->slot] == h->ticket &&
	    self->state[h->slot] == SLOT_RESERVED) {
		self->state[h->slot] = SLOT_TAKEN;
		h->slots = NULL;
		ok = 1;
	}
	pthread_mutex_unlock(&self->mtx);
	if (ok)
		Py_DECREF(op);
	return PyBool_FromLong(ok);
}

/* native_let_go ends self's hold: its slot is given back (only when
 * reserved, with only_reserved). */
static void native_let_go(HoldObject *self, int only_reserved)
{
	SlotsObject *s = (SlotsObject *)self->slots;

	if (s != NULL) {
		self->slots = NULL;
		if (native_free(s, self->slot, self->ticket, only_reserved))
			native_freed(s);
		Py_DECREF((PyObject *)s);
	}
}

static PyObject *Hold_give_back(PyObject *op, PyObject *unused)
{
	(void)unused;
	native_let_go((HoldObject *)op, 0);
	Py_RETURN_NONE;
}

/* Hold.cancel(): gives back a reserved frame's slot unsent; no-op once
 * sent or given back. */
static PyObject *Hold_cancel(PyObject *op, PyObject *unused)
{
	(void)unused;
	native_let_go((HoldObject *)op, 1);
	Py_RETURN_NONE;
}

/* Hold.reshape(shape): the frame's shape (packed rows); ValueError when
 * it is larger than the frame's area (the tensor's, for a result's). */
static PyObject *Hold_reshape(PyObject *op, PyObject *arg)
{
	HoldObject *self = (HoldObject *)op;
	unsigned long long bytes;
	Py_intptr_t shape[4];
	int nd;

	if (native_shape(arg, shape, &nd))
		return NULL;
	if (native_shape_bytes(shape, nd, (unsigned long long)self->ai.itemsize,
	                       &bytes) ||
	    bytes > self->cap) {
		PyErr_Format(PyExc_ValueError,
		             "reshape: shape %R is larger than the slot's %llu "
		             "bytes",
		             arg, self->cap);
		return NULL;
	}
	native_set_shape(self, shape, nd);
	Py_RETURN_NONE;
}

/* Hold.array(subtype): a numpy array of subtype (ndarray or a subclass)
 * over the hold's memory, whose base is the hold: made in one step, as
 * np.asarray(hold).view(subtype) would make it in two. */
static PyObject *native_hold_array(HoldObject *self, PyObject *subtype)
{
	PyObject *op = (PyObject *)self;
	int type_num;
	PyObject *a;

	if (native_np_load())
		return NULL;
	switch (self->ai.typekind * 16 + self->ai.itemsize) {
	case 'u' * 16 + 1:
		type_num = 2; /* NPY_UBYTE */
		break;
	case 'f' * 16 + 4:
		type_num = 11; /* NPY_FLOAT */
		break;
	case 'f' * 16 + 2:
		type_num = 23; /* NPY_HALF */
		break;
	default:
		PyErr_SetString(PyExc_ValueError, "no such tensor type");
		return NULL;
	}
	a = ((native_np_new_fn)native_np_api[93])(
	        (PyTypeObject *)subtype, self->ai.nd, self->shape, type_num,
	        self->strides, self->ai.data, self->ai.itemsize,
	        0x1 | 0x100 | 0x400, NULL);
	if (a == NULL)
		return NULL;
	Py_INCREF(op);
	if (((native_np_set_base_fn)native_np_api[282])(a, op) < 0) {
		Py_DECREF(a);
		return NULL;
	}
	return a;
}

static PyObject *Hold_array(PyObject *op, PyObject *subtype)
{
	if (native_np_load())
		return NULL;
	if (!PyType_Check(subtype) ||
	    !PyType_IsSubtype((PyTypeObject *)subtype,
	                      (PyTypeObject *)native_np_api[2])) {
		PyErr_SetString(PyExc_TypeError,
		                "array(subtype): numpy.ndarray or a subclass");
		return NULL;
	}
	return native_hold_array((HoldObject *)op, subtype);
}

static void Hold_dealloc(PyObject *op)
{
	HoldObject *self = (HoldObject *)op;
	PyTypeObject *tp = Py_TYPE(op);
	freefunc free_fn = (freefunc)PyType_GetSlot(tp, Py_tp_free);

	if (self->slots != NULL) {
		PyObject *et, *ev, *tb;

		/* A holder may die while an exception propagates (a frame
		 * unwinding): the warning and on_free (Python code) run with
		 * none set, and it is set again after; the warning names the
		 * ring, not op, which is dying. */
		PyErr_Fetch(&et, &ev, &tb);
		if (!self->released &&
		    PyErr_WarnFormat(PyExc_ResourceWarning, 1,
		                     "a ring slot's %s was never released: "
		                     "given back when it was garbage-collected "
		                     "(use 'with', release() or cancel())",
		                     self->what ? "result" : "frame") < 0)
			PyErr_WriteUnraisable(self->owner);
		native_let_go(self, 0);
		PyErr_Restore(et, ev, tb);
	}
	Py_XDECREF(self->owner);
	Py_XDECREF(self->map);
	Py_XDECREF(self->region);
	free_fn(op);
	Py_DECREF(tp);
}

static PyObject *Hold_get_struct(PyObject *op, void *c)
{
	(void)c;
	return PyCapsule_New(&((HoldObject *)op)->ai, NULL, NULL);
}

static PyObject *Hold_get_ring(PyObject *op, void *c)
{
	HoldObject *self = (HoldObject *)op;

	(void)c;
	if (self->slots == NULL)
		Py_RETURN_NONE;
	Py_INCREF(self->owner);
	return self->owner;
}

static PyObject *Hold_get_map(PyObject *op, void *c)
{
	(void)c;
	Py_INCREF(((HoldObject *)op)->map);
	return ((HoldObject *)op)->map;
}

static PyObject *Hold_get_slot(PyObject *op, void *c)
{
	(void)c;
	return PyLong_FromUnsignedLong(((HoldObject *)op)->slot);
}

static PyObject *Hold_get_ticket(PyObject *op, void *c)
{
	(void)c;
	return PyLong_FromUnsignedLongLong(((HoldObject *)op)->ticket);
}

static PyGetSetDef Hold_getset[] = {
        {"__array_struct__", Hold_get_struct, NULL,
         "The slot's frame or tensor, for numpy.", NULL},
        {"ring", Hold_get_ring, NULL,
         "The ring while the slot is held, else None.", NULL},
        {"map", Hold_get_map, NULL, "The mapping it lies in.", NULL},
        {"slot", Hold_get_slot, NULL, "The slot.", NULL},
        {"ticket", Hold_get_ticket, NULL, "The slot's ticket.", NULL},
        {NULL, NULL, NULL, NULL, NULL}};

static PyMethodDef Hold_methods[] = {
        {"give_back", Hold_give_back, METH_NOARGS,
         "Gives the slot back; no-op when done already."},
        {"cancel", Hold_cancel, METH_NOARGS,
         "Gives a reserved frame's slot back unsent."},
        {"reshape", Hold_reshape, METH_O, "Sets the frame's shape."},
        {"array", Hold_array, METH_O,
         "array(subtype): an array of subtype over the memory held."},
        {NULL, NULL, 0, NULL}};

static PyType_Slot Hold_slots[] = {
        {Py_tp_dealloc, Hold_dealloc},
        {Py_tp_getset, Hold_getset},
        {Py_tp_methods, Hold_methods},
        {Py_tp_doc, "What holds a ring's slot: a reserved frame or a "
                    "result's tensor (numpy arrays of it keep it alive)."},
        {0, NULL}};

static PyType_Spec Hold_spec = {"frameprep._native.Hold", sizeof(HoldObject), 0,
                                Py_TPFLAGS_DEFAULT, Hold_slots};

/* ---- A ring's whole frames in one call (Slots.arm, next_frame, send) ----
 *
 * While the ring's registration is armed, Slots.next_frame reserves a slot
 * and returns its RingFrame, and Slots.send sends a whole frame (a
 * reserved one as it lies, or a numpy array of the frame's shape copied
 * into a free slot) with the request Region.prepare kept for the slot,
 * and returns the RingResult: what ring.py does in a dozen Python calls,
 * done in one. Whatever else (a crop, a frame of another shape or
 * mapping, no free slot or gate token at once, a registration that
 * changed, a lost connection, the daemon's EREGION) is left to ring.py:
 * send returns None when it took nothing, or (slot, ticket, hold) when it
 * holds the slot taken (hold: the reserved frame's, None for a copy) and
 * the request must go through ring.py's retries. */

/* The Python classes that the fast path makes (set_ring_classes):
 * RingFrame, RingResult and Timings, and the attribute names it sets. */
static PyObject *native_frame_cls, *native_result_cls, *native_timings_cls;
static PyObject *native_limits_name;
static const char *const native_result_names[] = {
        "_hold",       "_tensor", "request_id", "_res",    "_src_width",
        "_src_height", "_reply",  "_transform", "_timings"};
static PyObject *native_result_attr[9];
static const char *const native_timings_names[] = {
        "queue_us", "compute_us", "h2d_us",   "kernel_us",
        "d2h_us",   "total_us",   "decode_us"};
static PyObject *native_timings_attr[7];

/* Where each attribute of native_result_names and native_timings_names
 * lies in an instance of its class (a __slots__ member: an object pointer
 * at a fixed offset), as native_find_slots found it; -1: set through
 * PyObject_GenericSetAttr. */
static Py_ssize_t native_result_off[9], native_timings_off[7];

/* native_find_slots finds the offset in an instance of tp of each of the
 * n (at most 16) attributes names: each set to an object of its own and
 * looked for among the instance's pointers; then each offset is checked
 * on a second instance, an object stored there being what the attribute
 * reads. All of off are -1 unless every one was found and checked (an
 * attribute that is no slot of the instance: a dict's, a property).
 * Returns -1 only when an allocation failed. */
static int native_find_slots(PyObject *type, PyObject *const *names, int n,
                             Py_ssize_t *off)
{
	PyTypeObject *tp = (PyTypeObject *)type;
	allocfunc alloc = (allocfunc)PyType_GetSlot(tp, Py_tp_alloc);
	PyObject *bs = PyObject_GetAttrString(type, "__basicsize__");
	Py_ssize_t size = bs != NULL ? PyLong_AsSsize_t(bs) : -1;
	PyObject *marks[16] = {NULL}, *obj, *obj2;
	const Py_ssize_t step = (Py_ssize_t)sizeof(PyObject *);
	int ok = n <= 16, i;

	Py_XDECREF(bs);
	for (i = 0; i < n; i++)
		off[i] = -1;
	if (size < 0) {
		PyErr_Clear();
		return 0;
	}
	for (i = 0; ok > 0 && i < n; i++)
		if ((marks[i] = PyList_New(0)) == NULL)
			ok = -1;
	obj = ok > 0 ? alloc(tp, 0) : NULL;
	obj2 = obj != NULL ? alloc(tp, 0) : NULL;
	if (ok > 0 && obj2 == NULL)
		ok = -1;
	for (i = 0; ok > 0 && i < n; i++) {
		if (PyObject_GenericSetAttr(obj, names[i], marks[i])) {
			ok = 0;
			break;
		}
		for (Py_ssize_t at = (Py_ssize_t)sizeof(PyObject);
		     at + step <= size; at += step)
			if (*(PyObject **)((char *)obj + at) == marks[i]) {
				off[i] = at;
				break;
			}
		ok = off[i] >= 0;
	}
	for (i = 0; ok > 0 && i < n; i++) { /* a store there is what reads */
		Py_INCREF(marks[i]);
		*(PyObject **)((char *)obj2 + off[i]) = marks[i];
	}
	for (i = 0; ok > 0 && i < n; i++) {
		PyObject *got = PyObject_GenericGetAttr(obj2, names[i]);

		ok = got == marks[i];
		Py_XDECREF(got);
	}
	Py_XDECREF(obj); /* its slots go with it */
	Py_XDECREF(obj2);
	for (i = 0; i < n; i++)
		Py_XDECREF(marks[i]);
	if (ok < 0)
		return -1;
	if (!ok) {
		PyErr_Clear();
		for (i = 0; i < n; i++)
			off[i] = -1;
	}
	return 0;
}

/* native_fill sets the n attributes of out (a fresh instance) to v: at
 * their slots' offsets, else through PyObject_GenericSetAttr; on failure
 * out is released and NULL returned. */
static PyObject *native_fill(PyObject *out, PyObject *const *names,
                             const Py_ssize_t *off, PyObject *const *v, int n)
{
	for (int i = 0; out != NULL && i < n; i++) {
		if (off[0] >= 0) {
			Py_INCREF(v[i]);
			*(PyObject **)((char *)out + off[i]) = v[i];
		} else if (PyObject_GenericSetAttr(out, names[i], v[i])) {
			Py_CLEAR(out);
		}
	}
	return out;
}

/* set_ring_classes(RingFrame, RingResult, Timings): the classes that the
 * fast path makes instances of without calling them: RingFrame a subclass
 * of numpy.ndarray, RingResult one of RingResultCore, Timings a class
 * made by object.__new__ (TypeError otherwise). */
static PyObject *native_set_ring_classes(PyObject *self, PyObject *args)
{
	PyObject *f, *r, *t;

	(void)self;
	if (!PyArg_ParseTuple(args, "O!O!O!", &PyType_Type, &f, &PyType_Type,
	                      &r, &PyType_Type, &t))
		return NULL;
	if (native_np_load())
		return NULL;
	if (!PyType_IsSubtype((PyTypeObject *)f,
	                      (PyTypeObject *)native_np_api[2]) ||
	    !PyType_IsSubtype((PyTypeObject *)r,
	                      (PyTypeObject *)RingResultCore_type) ||
	    PyType_GetSlot((PyTypeObject *)t, Py_tp_new) !=
	            PyType_GetSlot(&PyBaseObject_Type, Py_tp_new)) {
		PyErr_SetString(PyExc_TypeError,
		                "set_ring_classes: a numpy.ndarray subclass, a "
		                "RingResultCore subclass and a plain class");
		return NULL;
	}
	if (native_limits_name == NULL) {
		native_limits_name = PyUnicode_InternFromString("_limits");
		if (native_limits_name == NULL)
			return NULL;
		for (int i = 0; i < 9; i++)
			if ((native_result_attr[i] = PyUnicode_InternFromString(
			             native_result_names[i])) == NULL)
				return NULL;
		for (int i = 0; i < 7; i++)
			if ((native_timings_attr[i] =
			             PyUnicode_InternFromString(
			                     native_timings_names[i])) == NULL)
				return NULL;
	}
	if (native_find_slots(r, native_result_attr, 9, native_result_off) ||
	    native_find_slots(t, native_timings_attr, 7, native_timings_off))
		return NULL;
	Py_XDECREF(native_frame_cls);
	Py_XDECREF(native_result_cls);
	Py_XDECREF(native_timings_cls);
	Py_INCREF(f);
	native_frame_cls = f;
	Py_INCREF(r);
	native_result_cls = r;
	Py_INCREF(t);
	native_timings_cls = t;
	Py_RETURN_NONE;
}

static void native_disarm(SlotsObject *self)
{
	self->arm_gen++;
	Py_CLEAR(self->arm_map);
	Py_CLEAR(self->arm_region);
	Py_CLEAR(self->arm_sock);
	Py_CLEAR(self->arm_limits);
	Py_CLEAR(self->arm_gate);
	Py_CLEAR(self->arm_width);
	Py_CLEAR(self->arm_height);
}

/* Slots.arm(map, region, sock, limits, gate, width, height): next_frame
 * and send use the registration map (the mapping object that holders
 * keep) of region, whose requests for each slot's whole frame (of width
 * x height pixels) Region.prepare made and checked against limits, while
 * sock._limits is limits; gate (a queue.SimpleQueue of tokens, or None)
 * bounds the requests in flight. Until disarm() or close(). */
static PyObject *Slots_arm(PyObject *op, PyObject *args)
{
	SlotsObject *self = (SlotsObject *)op;
	PyObject *map, *region, *sock, *limits, *gate, *w, *h;

	if (!PyArg_ParseTuple(args, "OO!OOOO!O!", &map, Region_type, &region,
	                      &sock, &limits, &gate, &PyLong_Type, &w,
	                      &PyLong_Type, &h))
		return NULL;
	if (native_frame_cls == NULL)
		return native_raise(FPREP_EINVAL, "set_ring_classes first");
	if (native_slots_fit(self, region))
		return NULL;
	if (gate != Py_None && Py_TYPE(gate) != (PyTypeObject *)Gate_type) {
		PyErr_SetString(PyExc_TypeError, "arm: gate is a Gate or None");
		return NULL;
	}
	native_disarm(self);
	if (self->closed)
		Py_RETURN_NONE;
	Py_INCREF(map);
	self->arm_map = map;
	Py_INCREF(region);
	self->arm_region = region;
	Py_INCREF(sock);
	self->arm_sock = sock;
	Py_INCREF(limits);
	self->arm_limits = limits;
	self->arm_gate = gate != Py_None ? gate : NULL;
	Py_XINCREF(self->arm_gate);
	Py_INCREF(w);
	self->arm_width = w;
	Py_INCREF(h);
	self->arm_height = h;
	self->arm_base =
	        (uintptr_t)fprep_region_base(((RegionObject *)region)->r);
	Py_RETURN_NONE;
}

/* Slots.disarm(): next_frame and send return None until arm(). */
static PyObject *Slots_disarm(PyObject *op, PyObject *unused)
{
	(void)unused;
	native_disarm((SlotsObject *)op);
	Py_RETURN_NONE;
}

static PyObject *Slots_get_armed(PyObject *op, void *c)
{
	(void)c;
	return PyBool_FromLong(((SlotsObject *)op)->arm_map != NULL);
}

/* Slots.next_frame(ring): a free slot reserved, its whole frame as a
 * RingFrame of ring in the armed mapping; None when disarmed, closed or no
 * slot is free. */
static PyObject *Slots_next_frame(PyObject *op, PyObject *ring)
{
	SlotsObject *self = (SlotsObject *)op;
	HoldObject *h;
	uint64_t ticket = 0;
	unsigned k = 0;
	int got = 0;
	PyObject *a;

	if (self->arm_map == NULL)
		Py_RETURN_NONE;
	pthread_mutex_lock(&self->mtx);
	if (!self->closed && self->count > 0) {
		k = native_pop(self, SLOT_RESERVED, &ticket);
		got = 1;
	}
	pthread_mutex_unlock(&self->mtx);
	if (!got)
		Py_RETURN_NONE;
	h = native_hold_new(self, k, ticket, ring, self->arm_map,
	                    self->arm_region, 0);
	if (h == NULL)
		return NULL;
	a = native_hold_array(h, native_frame_cls);
	if (a == NULL)
		native_let_go(h, 0);
	Py_DECREF((PyObject *)h);
	return a;
}

/* native_is_frame: whether a (a numpy array) is uint8 of exactly the
 * slots' frame shape, packed (C order). */
static int native_is_frame(SlotsObject *self, const struct native_np_array *a)
{
	Py_intptr_t step = 1;

	if (a->nd != self->frame_nd ||
	    ((const struct native_np_descr *)a->descr)->type_num !=
	            2 /* NPY_UBYTE */)
		return 0;
	for (int i = a->nd - 1; i >= 0; i--) {
		if (a->dimensions[i] != self->frame_shape[i] ||
		    (a->strides[i] != step && a->dimensions[i] != 1))
			return 0;
		step *= a->dimensions[i];
	}
	return 1;
}

/* native_ring_result makes the RingResult of res for slot k (ticket) of
 * ring, which then holds the slot; on failure the slot is given back. */
static PyObject *native_ring_result(SlotsObject *self, unsigned k,
                                    uint64_t ticket, PyObject *ring,
                                    PyObject *map, PyObject *region,
                                    PyObject *w, PyObject *h_,
                                    const fprep_result *res)
{
	PyTypeObject *tp = (PyTypeObject *)native_result_cls;
	allocfunc alloc = (allocfunc)PyType_GetSlot(tp, Py_tp_alloc);
	PyObject *v[9], *out = NULL, *r;
	HoldObject *h;

	r = native_result_new(res);
	if (r == NULL) {
		if (native_free(self, k, ticket, 0))
			native_freed(self);
		return NULL;
	}
	h = native_hold_new(self, k, ticket, ring, map, region, 1);
	if (h == NULL) {
		Py_DECREF(r);
		return NULL;
	}
	v[0] = (PyObject *)h;
	v[1] = Py_None;
	v[2] = PyLong_FromUnsignedLongLong(res->header.request_id);
	v[3] = r;
	v[4] = w;
	v[5] = h_;
	v[6] = v[7] = v[8] = Py_None;
	if (v[2] != NULL)
		out = native_fill(alloc(tp, 0), native_result_attr,
		                  native_result_off, v, 9);
	if (out == NULL)
		native_let_go(h, 0);
	Py_XDECREF(v[2]);
	Py_DECREF(r);
	Py_DECREF((PyObject *)h);
	return out;
}

/* native_status_error raises the daemon's status of res with its
 * message, as frameprep._core.checked does. */
static PyObject *native_status_error(const fprep_result *res)
{
	PyObject *msg, *exc;

	if (native_factory == NULL)
		return native_raise(res->header.status, res->header.message);
	msg = PyUnicode_DecodeUTF8(
	        res->header.message,
	        (Py_ssize_t)strnlen(res->header.message, FPREP_MESSAGE_SIZE),
	        "replace");
	if (msg == NULL)
		return NULL;
	exc = PyObject_CallFunction(native_factory, "iO",
	                            (int)res->header.status, msg);
	Py_DECREF(msg);
	if (exc == NULL)
		return NULL;
	PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
	Py_DECREF(exc);
	return NULL;
}

/* native_copy_send copies nbytes from src to dst, then sends req in entry
 * k of r (GIL released). */
static int native_copy_send(fprep_region *r, unsigned k, fprep_request *req,
                            fprep_result *res, uint8_t *dst, const void *src,
                            size_t nbytes)
{
	if (nbytes)
		memmove(dst, src, nbytes);
	return fprep_region_request(r, k, req, res);
}

/* Slots.send(frame, ring): sends a whole frame of ring (see above) and
 * returns its RingResult; None when it took nothing (ring.py's path
 * then); (slot, ticket, hold) when the slot is taken but the request
 * must be sent again by ring.py (the registration changed meanwhile, the
 * connection was lost, the daemon forgot the region). Raises the
 * request's error (the slot given back) otherwise. */
static PyObject *Slots_send(PyObject *op, PyObject *const *args,
                            Py_ssize_t nargs)
{
	SlotsObject *self = (SlotsObject *)op;
	const struct native_np_array *fa;
	PyObject *frame, *ring, *out = Py_None, *t;
	PyObject *map, *region, *sock, *limits, *gate, *w, *h_;
	PyTypeObject *tp;
	HoldObject *hold = NULL;
	RegionObject *ro;
	ClientObject *c;
	unsigned k = 0;
	uint64_t ticket = 0, gen;
	unsigned long long base;
	size_t nbytes = 0;
	fprep_request req;
	fprep_result res;
	char why[256];
	int ok, err, lost;

	if (nargs != 2) {
		PyErr_SetString(PyExc_TypeError, "send(frame, ring)");
		return NULL;
	}
	frame = args[0];
	ring = args[1];
	if (self->arm_map == NULL || self->closed)
		Py_RETURN_NONE;
	if (native_np_load())
		return NULL;
	tp = Py_TYPE(frame);
	fa = (const struct native_np_array *)frame;
	if (tp == (PyTypeObject *)native_frame_cls) {
		PyObject *b = fa->base;

		if (b == NULL || Py_TYPE(b) != (PyTypeObject *)Hold_type)
			Py_RETURN_NONE;
		hold = (HoldObject *)b;
		if (hold->slots != op || hold->what != 0 ||
		    hold->map != self->arm_map || fa->data != hold->ai.data ||
		    !native_is_frame(self, fa))
			Py_RETURN_NONE;
		k = hold->slot;
		ticket = hold->ticket;
	} else if (tp == (PyTypeObject *)native_np_api[2] /* ndarray */) {
		if (!native_is_frame(self, fa))
			Py_RETURN_NONE;
		nbytes = 1;
		for (int i = 0; i < fa->nd; i++)
			nbytes *= (size_t)fa->dimensions[i];
	} else {
		Py_RETURN_NONE;
	}
	/* The registration as it is now: what follows may run other threads
	 * (Python code, the request), whose disarm must not drop it. */
	map = self->arm_map;
	region = self->arm_region;
	sock = self->arm_sock;
	limits = self->arm_limits;
	gate = self->arm_gate;
	w = self->arm_width;
	h_ = self->arm_height;
	base = self->arm_base;
	gen = self->arm_gen;
	Py_INCREF(map);
	Py_INCREF(region);
	Py_INCREF(sock);
	Py_INCREF(limits);
	Py_XINCREF(gate);
	Py_INCREF(w);
	Py_INCREF(h_);
	ro = (RegionObject *)region;
	c = (ClientObject *)ro->client;
	/* The frames' requests were checked against these limits. */
	t = PyObject_GetAttr(sock, native_limits_name);
	if (t == NULL)
		PyErr_Clear();
	ok = t == limits && ro->r != NULL;
	Py_XDECREF(t);
	if (!ok)
		goto done;
	if (native_enter(c)) {
		PyErr_Clear();
		goto done;
	}
	if (fprep__client_conn_lost(c->client) != ro->lost) {
		native_leave(c); /* the daemon forgot the region */
		goto done;
	}
	if (gate != NULL && !native_gate_try((GateObject *)gate)) {
		native_leave(c); /* no token at once: ring.py waits */
		goto done;
	}
	pthread_mutex_lock(&self->mtx);
	if (hold != NULL) {
		ok = !self->closed && hold->slots == op &&
		     self->ticket[k] == ticket &&
		     self->state[k] == SLOT_RESERVED;
		if (ok) {
			self->state[k] = SLOT_TAKEN;
			hold->slots = NULL;
		}
	} else {
		ok = !self->closed && self->count > 0;
		if (ok)
			k = native_pop(self, SLOT_TAKEN, &ticket);
	}
	pthread_mutex_unlock(&self->mtx);
	if (hold != NULL && ok)
		Py_DECREF(op); /* the holder's reference */
	err = -1;
	if (ok && k < ro->nprepared && ro->prepared[k].kind != 0) {
		uint8_t *dst =
		        (uint8_t *)(uintptr_t)(base + k * self->slot_bytes +
		                               self->frame_off);

		req = ro->prepared[k];
		memset(&res, 0, sizeof(res));
		Py_BEGIN_ALLOW_THREADS err = native_copy_send(
		        ro->r, k, &req, &res, dst, fa->data, nbytes);
		Py_END_ALLOW_THREADS
	}
	lost = err > 0 && fprep__client_conn_lost(c->client) != ro->lost;
	if (err > 0)
		snprintf(why, sizeof(why), "%s",
		         fprep_client_last_error(c->client));
	native_leave(c);
	if (gate != NULL)
		native_gate_give((GateObject *)gate);
	if (!ok) /* no free slot at once: ring.py waits for one */
		goto done;
	/* The slot is taken: it is given back, held by the result, or
	 * handed to ring.py. */
	if (err > 0 && err != FPREP_EREGION && !lost) {
		/* The caller's error (a timeout, a request refused). */
		if (native_free(self, k, ticket, 0))
			native_freed(self);
		out = native_raise(err, why);
	} else if (err == 0 && self->arm_gen == gen && res.header.status == 0) {
		out = native_ring_result(self, k, ticket, ring, map, region, w,
		                         h_, &res);
	} else if (err == 0 && self->arm_gen == gen &&
	           res.header.status != FPREP_EREGION) {
		out = native_status_error(&res);
		fprep_result_fini(&res);
		if (native_free(self, k, ticket, 0))
			native_freed(self);
	} else {
		/* Not prepared, the region forgotten or the connection lost,
		 * or the registration changed during the request (its reply
		 * is not taken): ring.py sends it again. */
		if (err == 0)
			fprep_result_fini(&res);
		out = Py_BuildValue("(IKO)", k, (unsigned long long)ticket,
		                    hold != NULL ? (PyObject *)hold : Py_None);
		if (out == NULL && native_free(self, k, ticket, 0))
			native_freed(self);
		self->handed_back++;
	}
done:
	if (out == Py_None)
		Py_INCREF(out);
	Py_DECREF(map);
	Py_DECREF(region);
	Py_DECREF(sock);
	Py_DECREF(limits);
	Py_XDECREF(gate);
	Py_DECREF(w);
	Py_DECREF(h_);
	return out;
}

/* timings(result): the daemon's timings of a Result as a Timings
 * (set_ring_classes), made without its __init__. */
static PyObject *native_timings(PyObject *self, PyObject *arg)
{
	const fprep_reply_header *hd;
	PyTypeObject *tp = (PyTypeObject *)native_timings_cls;
	allocfunc alloc;
	unsigned long v[7];
	PyObject *out, *x[7] = {NULL};
	int ok = 1;

	(void)self;
	if (Py_TYPE(arg) != (PyTypeObject *)Result_type) {
		PyErr_SetString(PyExc_TypeError, "timings(result): a Result");
		return NULL;
	}
	if (tp == NULL)
		return native_raise(FPREP_EINVAL, "set_ring_classes first");
	hd = &((ResultObject *)arg)->res.header;
	v[0] = hd->t_queue_us;
	v[1] = hd->t_compute_us;
	v[2] = hd->t_h2d_us;
	v[3] = hd->t_kernel_us;
	v[4] = hd->t_d2h_us;
	v[5] = hd->t_total_us;
	v[6] = hd->t_decode_us;
	alloc = (allocfunc)PyType_GetSlot(tp, Py_tp_alloc);
	for (int i = 0; i < 7; i++)
		if ((x[i] = PyLong_FromUnsignedLong(v[i])) == NULL)
			ok = 0;
	out = ok ? native_fill(alloc(tp, 0), native_timings_attr,
	                       native_timings_off, x, 7)
	         : NULL;
	for (int i = 0; i < 7; i++)
		Py_XDECREF(x[i]);
	return out;
}

/* address(array): the address of a numpy array's first byte, as
 * array.__array_interface__["data"][0] (without the dict). */
static PyObject *native_address(PyObject *self, PyObject *arg)
{
	(void)self;
	if (native_np_load())
		return NULL;
	if (!PyObject_TypeCheck(arg, (PyTypeObject *)native_np_api[2])) {
		PyErr_SetString(PyExc_TypeError, "address(array): an ndarray");
		return NULL;
	}
	return PyLong_FromUnsignedLongLong(
	        (uintptr_t)((const struct native_np_array *)arg)->data);
}

/* tensor(result): a writable numpy array over the tensor in a Result's
 * payload (as numpy.asarray(result) through its __array_interface__),
 * made in one step; the result is its base. */
static PyObject *native_tensor(PyObject *self, PyObject *arg)
{
	const fprep_result *res;
	const fprep_reply_header *h;
	Py_intptr_t shape[4];
	int type_num, size, flags = 0x400; /* NPY_ARRAY_WRITEABLE */
	uint64_t xfs;
	PyObject *a;

	(void)self;
	if (Py_TYPE(arg) != (PyTypeObject *)Result_type) {
		PyErr_SetString(PyExc_TypeError, "tensor(result): a Result");
		return NULL;
	}
	if (native_np_load())
		return NULL;
	res = &((ResultObject *)arg)->res;
	h = &res->header;
	switch (h->dtype) {
	case FPREP_DTYPE_F32:
		type_num = 11, size = 4; /* NPY_FLOAT */
		break;
	case FPREP_DTYPE_F16:
		type_num = 23, size = 2; /* NPY_HALF */
		break;
	case FPREP_DTYPE_U8:
		type_num = 2, size = 1; /* NPY_UBYTE */
		break;
	default:
		type_num = -1, size = 0;
	}
	/* A ROIS or BATCH reply's payload is the tensor, then N transform
	 * records. */
	xfs = h->kind == FPREP_KIND_ROIS || h->kind == FPREP_KIND_BATCH
	              ? (uint64_t)h->shape[0] * FPREP_ELEMENT_XF_SIZE
	              : 0;
	if (type_num < 0 || h->ndim < 1 || h->ndim > 4 ||
	    res->payload == NULL || res->payload_size != h->tensor_size + xfs) {
		PyErr_SetString(PyExc_AttributeError,
		                "the reply carries no tensor");
		return NULL;
	}
	for (unsigned i = 0; i < h->ndim; i++)
		shape[i] = h->shape[i];
	if ((uintptr_t)res->payload % (unsigned)size == 0)
		flags |= 0x100; /* NPY_ARRAY_ALIGNED */
	a = ((native_np_new_fn)native_np_api[93])(
	        (PyTypeObject *)native_np_api[2], (int)h->ndim, shape, type_num,
	        NULL, (void *)(uintptr_t)res->payload, size,
	        flags | 0x1 /* C order */, NULL);
	if (a == NULL)
		return NULL;
	Py_INCREF(arg);
	if (((native_np_set_base_fn)native_np_api[282])(a, arg) < 0) {
		Py_DECREF(a);
		return NULL;
	}
	return a;
}

/* Slots.bare(): the request of Slots.send for a frame already in its slot,
 * and nothing else: takes a free slot, sends its prepared request as it
 * lies (GIL released), gives the slot back. Makes no object and passes no
 * in-flight gate: python -m frameprep.bench's "bare" path times a Python
 * loop around it, the floor under any binding's per-frame CPU. Returns
 * None; raises the request's error, or EINVAL when the ring is not armed
 * or has no free slot. */
static PyObject *Slots_bare(PyObject *op, PyObject *unused)
{
	SlotsObject *self = (SlotsObject *)op;
	RegionObject *ro;
	ClientObject *c;
	PyObject *region;
	fprep_request req;
	fprep_result res;
	uint64_t ticket = 0;
	unsigned k = 0;
	int ok, err = FPREP_EINVAL;
	char why[256] = "the ring has no prepared free slot";

	(void)unused;
	if (self->arm_map == NULL || self->closed)
		return native_raise(FPREP_EINVAL, "the ring is not armed");
	region = self->arm_region;
	Py_INCREF(region);
	ro = (RegionObject *)region;
	c = (ClientObject *)ro->client;
	if (native_enter(c)) {
		Py_DECREF(region);
		return NULL;
	}
	pthread_mutex_lock(&self->mtx);
	ok = !self->closed && self->count > 0;
	if (ok)
		k = native_pop(self, SLOT_TAKEN, &ticket);
	pthread_mutex_unlock(&self->mtx);
	if (ok && ro->r != NULL && k < ro->nprepared &&
	    ro->prepared[k].kind != 0) {
		req = ro->prepared[k];
		memset(&res, 0, sizeof(res));
		Py_BEGIN_ALLOW_THREADS err =
		        fprep_region_request(ro->r, k, &req, &res);
		Py_END_ALLOW_THREADS if (err == 0)
		{
			err = res.header.status;
			if (err != 0)
				snprintf(why, sizeof(why), "%s",
				         res.header.message);
			fprep_result_fini(&res);
		}
		else
		{
			snprintf(why, sizeof(why), "%s",
			         fprep_client_last_error(c->client));
		}
	}
	native_leave(c);
	if (ok && native_free(self, k, ticket, 0))
		native_freed(self);
	Py_DECREF(region);
	if (err != 0)
		return native_raise(err, why);
	Py_RETURN_NONE;
}

static PyMethodDef Slots_methods[] = {
        {"layout", Slots_layout, METH_VARARGS,
         "layout(slot_bytes, frame_offset, frame_shape, tensor_shape, "
         "typekind, itemsize, on_free)."},
        {"take", Slots_take, METH_VARARGS,
         "take(state, timeout_s, mine=True) -> (slot, ticket), None (none "
         "came) or False (every slot is this thread's)."},
        {"release", Slots_release, METH_VARARGS,
         "release(slot, ticket) -> whether it was given back."},
        {"claim", Slots_claim, METH_O,
         "claim(hold): takes a reserved frame's slot for sending."},
        {"frame_hold", Slots_frame_hold, METH_VARARGS,
         "frame_hold(slot, ticket, ring, map, region) -> Hold."},
        {"result_hold", Slots_result_hold, METH_VARARGS,
         "result_hold(slot, ticket, ring, map, region) -> Hold."},
        {"close", Slots_close, METH_NOARGS, "Hands out no slot any more."},
        {"free", Slots_free, METH_NOARGS, "The free slots, a list."},
        {"states", Slots_states, METH_NOARGS,
         "Each slot's (state, ticket): 0 free, 1 reserved, 2 in flight, "
         "3 held."},
        {"arm", Slots_arm, METH_VARARGS,
         "arm(map, region, sock, limits, gate, width, height)."},
        {"disarm", Slots_disarm, METH_NOARGS,
         "next_frame and send return None until arm()."},
        {"next_frame", Slots_next_frame, METH_O,
         "next_frame(ring) -> RingFrame, or None."},
        {"send", (PyCFunction)(void (*)(void))Slots_send, METH_FASTCALL,
         "send(frame, ring) -> RingResult, None or (slot, ticket, hold)."},
        {"bare", Slots_bare, METH_NOARGS,
         "bare(): a free slot's prepared request as it lies; no result."},
        {NULL, NULL, 0, NULL}};

static PyObject *Slots_get_handed_back(PyObject *op, void *c)
{
	(void)c;
	return PyLong_FromUnsignedLongLong(((SlotsObject *)op)->handed_back);
}

static PyGetSetDef Slots_getset[] = {
        {"armed", Slots_get_armed, NULL, "Whether arm() holds.", NULL},
        {"handed_back", Slots_get_handed_back, NULL,
         "How many requests send took a slot for and handed back.", NULL},
        {NULL, NULL, NULL, NULL, NULL}};

static PyType_Slot Slots_slots[] = {
        {Py_tp_new, Slots_new},
        {Py_tp_dealloc, Slots_dealloc},
        {Py_tp_methods, Slots_methods},
        {Py_tp_getset, Slots_getset},
        {Py_tp_doc, "Slots(n): a ring's slot table (thread-safe)."},
        {0, NULL}};

static PyType_Spec Slots_spec = {"frameprep._native.Slots", sizeof(SlotsObject),
                                 0, Py_TPFLAGS_DEFAULT, Slots_slots};

/* ---- Ring.next_frame, Ring.preprocess and RingResult's release and
 * timings in C (RingCore, RingResultCore) ----
 *
 * ring.Ring derives from RingCore and ring.RingResult from RingResultCore
 * so that the calls made for every frame bind straight to C: a whole frame
 * goes through Slots.next_frame and Slots.send without a Python frame
 * between, and only what these leave (see Slots.send) calls the ring's
 * Python steps: _next_frame(shape), _preprocess(frame) and
 * _resend(frame, (slot, ticket, hold)). */

typedef struct {
	PyObject_HEAD PyObject *slots; /* the ring's Slots (ring.py sets it) */
} RingCoreObject;

static PyObject *RingCore_type;
static PyObject *native_next_frame_name, *native_preprocess_name,
        *native_resend_name;

static int native_core_names(void)
{
	if (native_resend_name != NULL)
		return 0;
	native_next_frame_name = PyUnicode_InternFromString("_next_frame");
	native_preprocess_name = PyUnicode_InternFromString("_preprocess");
	native_resend_name = PyUnicode_InternFromString("_resend");
	return native_resend_name != NULL ? 0 : -1;
}

/* native_ring_slots is the Slots of ring (a RingCore), or NULL (no
 * error) when it has none. */
static PyObject *native_ring_slots(PyObject *ring)
{
	PyObject *s = ((RingCoreObject *)ring)->slots;

	return s != NULL && Py_TYPE(s) == (PyTypeObject *)Slots_type ? s : NULL;
}

/* Ring.next_frame(shape=None): Slots.next_frame's frame, else
 * ring._next_frame(shape). */
static PyObject *RingCore_next_frame(PyObject *op, PyObject *const *args,
                                     Py_ssize_t nargs, PyObject *kwnames)
{
	PyObject *shape = Py_None, *s, *f;
	Py_ssize_t nkw = kwnames != NULL ? PyTuple_Size(kwnames) : 0;

	if (nargs + nkw > 1 ||
	    (nkw == 1 && PyUnicode_CompareWithASCIIString(
	                         PyTuple_GetItem(kwnames, 0), "shape") != 0)) {
		PyErr_SetString(PyExc_TypeError, "next_frame(shape=None)");
		return NULL;
	}
	if (nargs + nkw == 1)
		shape = args[0];
	if (native_core_names())
		return NULL;
	s = native_ring_slots(op);
	if (shape == Py_None && s != NULL) {
		f = Slots_next_frame(s, op);
		if (f != Py_None)
			return f; /* the frame, or NULL: its error */
		Py_DECREF(f);
	}
	return PyObject_CallMethodObjArgs(op, native_next_frame_name, shape,
	                                  NULL);
}

/* Ring.preprocess(frame): Slots.send's result, else ring._preprocess(frame)
 * (it took nothing) or ring._resend(frame, got) (it holds a slot taken). */
static PyObject *RingCore_preprocess(PyObject *op, PyObject *frame)
{
	PyObject *s, *got, *out, *args[2];

	if (native_core_names())
		return NULL;
	s = native_ring_slots(op);
	if (s == NULL)
		return PyObject_CallMethodObjArgs(op, native_preprocess_name,
		                                  frame, NULL);
	args[0] = frame;
	args[1] = op;
	got = Slots_send(s, args, 2);
	if (got == NULL || (got != Py_None && !PyTuple_Check(got)))
		return got; /* the result, or NULL: its error */
	if (got == Py_None)
		out = PyObject_CallMethodObjArgs(op, native_preprocess_name,
		                                 frame, NULL);
	else
		out = PyObject_CallMethodObjArgs(op, native_resend_name, frame,
		                                 got, NULL);
	Py_DECREF(got);
	return out;
}

static PyObject *RingCore_get_slots(PyObject *op, void *c)
{
	PyObject *s = ((RingCoreObject *)op)->slots;

	(void)c;
	if (s == NULL) {
		PyErr_SetString(PyExc_AttributeError, "_slots");
		return NULL;
	}
	Py_INCREF(s);
	return s;
}

static int RingCore_set_slots(PyObject *op, PyObject *v, void *c)
{
	PyObject *old = ((RingCoreObject *)op)->slots;

	(void)c;
	Py_XINCREF(v);
	((RingCoreObject *)op)->slots = v;
	Py_XDECREF(old);
	return 0;
}

static void RingCore_dealloc(PyObject *op)
{
	PyTypeObject *tp = Py_TYPE(op);
	freefunc free_fn = (freefunc)PyType_GetSlot(tp, Py_tp_free);

	Py_CLEAR(((RingCoreObject *)op)->slots);
	free_fn(op);
	Py_DECREF(tp);
}

static PyMethodDef RingCore_methods[] = {
        {"next_frame", (PyCFunction)(void (*)(void))RingCore_next_frame,
         METH_FASTCALL | METH_KEYWORDS,
         "next_frame($self, /, shape=None)\n--\n\n"
         "next_frame(shape=None) -> RingFrame: reserves a free slot and "
         "returns a writable uint8 RingFrame of its frame area, of shape "
         "shape (default frame_shape; at most the slot's bytes). Pass it "
         "to preprocess(), or give it back with its cancel(). Waits up to "
         "the client's timeout for a free slot (RequestTimeoutError)."},
        {"preprocess", RingCore_preprocess, METH_O,
         "preprocess($self, frame, /)\n--\n\n"
         "preprocess(frame) -> RingResult: preprocesses a frame through "
         "the ring: a frame from next_frame() (or a crop of one) as it "
         "lies, any other uint8 array (H, W[, C], or a YUV frame of the "
         "ring's format) after copying it into a free slot. The result's "
         "tensor views the slot, held until the result is released. "
         "Raises as Client.preprocess, and LimitExceededError for a frame "
         "larger than a slot."},
        {NULL, NULL, 0, NULL}};

static PyGetSetDef RingCore_getset[] = {
        {"_slots", RingCore_get_slots, RingCore_set_slots,
         "The ring's slot table (a Slots).", NULL},
        {NULL, NULL, NULL, NULL, NULL}};

static PyType_Slot RingCore_slots[] = {
        {Py_tp_new, PyType_GenericNew},
        {Py_tp_dealloc, RingCore_dealloc},
        {Py_tp_methods, RingCore_methods},
        {Py_tp_getset, RingCore_getset},
        {Py_tp_doc, "The base of ring.Ring: its per-frame calls in C."},
        {0, NULL}};

static PyType_Spec RingCore_spec = {
        "frameprep._native.RingCore", sizeof(RingCoreObject), 0,
        Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, RingCore_slots};

/* native_result_slot is the object in attribute i of native_result_names
 * of op (a RingResult), a new reference; NULL with an error when unset. */
static PyObject *native_result_slot(PyObject *op, int i)
{
	PyObject *v;

	if (native_result_cls != NULL && native_result_off[0] >= 0 &&
	    PyObject_TypeCheck(op, (PyTypeObject *)native_result_cls)) {
		v = *(PyObject **)((char *)op + native_result_off[i]);
		if (v == NULL) {
			PyErr_SetObject(PyExc_AttributeError,
			                native_result_attr[i]);
			return NULL;
		}
		Py_INCREF(v);
		return v;
	}
	if (native_result_attr[i] == NULL)
		return native_raise(FPREP_EINVAL, "set_ring_classes first");
	return PyObject_GenericGetAttr(op, native_result_attr[i]);
}

/* native_result_set sets attribute i of native_result_names of op (a
 * RingResult) to v (not stolen). */
static int native_result_set(PyObject *op, int i, PyObject *v)
{
	if (native_result_cls != NULL && native_result_off[0] >= 0 &&
	    PyObject_TypeCheck(op, (PyTypeObject *)native_result_cls)) {
		PyObject **at =
		        (PyObject **)((char *)op + native_result_off[i]);
		PyObject *old = *at;

		Py_INCREF(v);
		*at = v;
		Py_XDECREF(old);
		return 0;
	}
	return PyObject_GenericSetAttr(op, native_result_attr[i], v);
}

/* native_result_give_back releases op (a RingResult): its holder (_hold)
 * is marked released and the result lets go of it and of its tensor
 * (_tensor), both None from then on; the slot goes back to the ring when
 * the holder is gone, at once unless numpy arrays still view the tensor.
 * No-op once released. */
static PyObject *native_result_give_back(PyObject *op)
{
	PyObject *h = native_result_slot(op, 0);

	if (h == NULL)
		return NULL;
	if (h == Py_None) {
		Py_DECREF(h);
		Py_RETURN_NONE;
	}
	if (Py_TYPE(h) == (PyTypeObject *)Hold_type)
		((HoldObject *)h)->released = 1;
	/* The tensor first: it holds the holder too. */
	if (native_result_set(op, 1, Py_None) ||
	    native_result_set(op, 0, Py_None)) {
		Py_DECREF(h);
		return NULL;
	}
	Py_DECREF(h); /* the last reference unless arrays view the slot */
	Py_RETURN_NONE;
}

static PyObject *RingResultCore_release(PyObject *op, PyObject *unused)
{
	(void)unused;
	return native_result_give_back(op);
}

static PyObject *RingResultCore_enter(PyObject *op, PyObject *unused)
{
	(void)unused;
	Py_INCREF(op);
	return op;
}

static PyObject *RingResultCore_exit(PyObject *op, PyObject *args)
{
	(void)args;
	return native_result_give_back(op);
}

/* RingResult.timings: made from the reply header when first read (kept in
 * _timings). */
static PyObject *RingResultCore_get_timings(PyObject *op, void *c)
{
	PyObject *t = native_result_slot(op, 8), *res;

	(void)c;
	if (t == NULL || t != Py_None)
		return t;
	Py_DECREF(t);
	res = native_result_slot(op, 3);
	if (res == NULL)
		return NULL;
	t = native_timings(NULL, res);
	Py_DECREF(res);
	if (t == NULL)
		return NULL;
	if (native_result_off[0] >= 0 &&
	    PyObject_TypeCheck(op, (PyTypeObject *)native_result_cls)) {
		PyObject **at =
		        (PyObject **)((char *)op + native_result_off[8]);
		PyObject *old = *at;

		Py_INCREF(t);
		*at = t;
		Py_XDECREF(old);
	} else if (PyObject_GenericSetAttr(op, native_result_attr[8], t)) {
		Py_DECREF(t);
		return NULL;
	}
	return t;
}

static PyMethodDef RingResultCore_methods[] = {
        {"release", RingResultCore_release, METH_NOARGS,
         "release($self, /)\n--\n\n"
         "Releases the result: its tensor can no longer be read through "
         "it, and its slot goes back to the ring once no numpy array "
         "views the tensor (at once when none does); no-op when done "
         "already."},
        {"__enter__", RingResultCore_enter, METH_NOARGS,
         "__enter__($self, /)\n--\n\nReturns self."},
        {"__exit__", RingResultCore_exit, METH_VARARGS,
         "__exit__($self, *exc)\n--\n\nReleases the result (see release)."},
        {NULL, NULL, 0, NULL}};

static PyGetSetDef RingResultCore_getset[] = {
        {"timings", RingResultCore_get_timings, NULL,
         "The daemon's timings of the request (a Timings).", NULL},
        {NULL, NULL, NULL, NULL, NULL}};

static PyType_Slot RingResultCore_slots[] = {
        {Py_tp_methods, RingResultCore_methods},
        {Py_tp_getset, RingResultCore_getset},
        {Py_tp_doc, "A base of ring.RingResult (no fields of its own): its "
                    "release(), with-block and timings in C."},
        {0, NULL}};

static PyType_Spec RingResultCore_spec = {
        "frameprep._native.RingResultCore", 0, 0,
        Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, RingResultCore_slots};

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
 * as the daemon is told of it (fprep__cuda_ptr_lookup): (base, size, IPC
 * handle, device UUID, device ordinal). Raises UnsupportedError (no CUDA
 * driver), InvalidRequestError (not device memory, no IPC handle) or
 * CudaError. */
static PyObject *native_cuda_allocation(PyObject *self, PyObject *arg)
{
	unsigned long long ptr = PyLong_AsUnsignedLongLong(arg);
	char msg[FPREP_MESSAGE_SIZE];
	fprep__cuda_ptr p;
	int err;

	(void)self;
	if (ptr == (unsigned long long)-1 && PyErr_Occurred())
		return NULL;
	msg[0] = '\0';
	Py_BEGIN_ALLOW_THREADS err = fprep__cuda_ptr_lookup(
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
 * (fprep__cuda_ptr_id): the ID is unique within the process for its whole
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
	Py_BEGIN_ALLOW_THREADS err = fprep__cuda_ptr_id(
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
	    native_add_type(m, &Region_spec, &Region_type) ||
	    native_add_type(m, &Gate_spec, &Gate_type) ||
	    native_add_type(m, &Slots_spec, &Slots_type) ||
	    native_add_type(m, &Hold_spec, &Hold_type) ||
	    native_add_type(m, &RingCore_spec, &RingCore_type) ||
	    native_add_type(m, &RingResultCore_spec, &RingResultCore_type) ||
	    native_add_constants(m)) {
		Py_DECREF(m);
		return NULL;
	}
	return m;
}
