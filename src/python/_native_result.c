/*
 * _native_result.c: Request (a request made once from a dict of fields)
 * and Result (a reply owning its payload, viewed by numpy through
 * __array_interface__), and the numpy arrays read through numpy's stable
 * array struct without its headers (native_bytes_of).
 */
#include "_native.h"

/* ---- Request: a request made once from its fields ---- */

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

PyType_Spec Request_spec = {"frameprep._native.Request", sizeof(RequestObject),
                            0, Py_TPFLAGS_DEFAULT, Request_slots};
PyObject *Request_type;

/* ---- Result: one reply, owning its payload ---- */

PyObject *Result_type;

PyObject *native_result_new(const fprep_result *res)
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

PyType_Spec Result_spec = {"frameprep._native.Result", sizeof(ResultObject), 0,
                           Py_TPFLAGS_DEFAULT, Result_slots};

/* ---- numpy arrays, read without numpy's headers ---- */

/* numpy's C API table (its _ARRAY_API capsule), loaded at the first
 * call that meets a numpy array; the entries used are numpy's stable ones, the
 * same in 1.x and 2.x: PyArray_New (93) and PyArray_SetBaseObject (282). */
void **native_np_api;

int native_np_load(void)
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

/* native_np_view makes a numpy array of subtype (ndarray or a subclass)
 * over nd dimensions of shape (strides NULL: C order) of type_num at data,
 * its flags (NPY_ARRAY_*) as given, whose base is base (a new reference
 * to it); NULL with an error. native_np_load must have succeeded. */
PyObject *native_np_view(PyObject *subtype, int nd, const Py_intptr_t *shape,
                         int type_num, const Py_intptr_t *strides, void *data,
                         int itemsize, int flags, PyObject *base)
{
	PyObject *a = ((native_np_new_fn)native_np_api[93])(
	        (PyTypeObject *)subtype, nd, shape, type_num, strides, data,
	        itemsize, flags, NULL);

	if (a == NULL)
		return NULL;
	Py_INCREF(base);
	if (((native_np_set_base_fn)native_np_api[282])(a, base) < 0) {
		Py_DECREF(a);
		return NULL;
	}
	return a;
}

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
int native_bytes_of(PyObject *src, const char *what, unsigned long long need,
                    const void **addr)
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
