/*
 * _native_ring_core.c: RingCore and RingResultCore, the C bases of
 * ring.Ring and ring.RingResult, so that next_frame, preprocess, release
 * and timings bind straight to C.
 */
#include "_native.h"

/* ---- Ring.next_frame, Ring.preprocess and RingResult's release and
 * timings in C (RingCore, RingResultCore) ----
 *
 * ring.Ring derives from RingCore and ring.RingResult from RingResultCore
 * so that the calls made for every frame bind straight to C: a whole frame
 * goes through CRing.next_frame and CRing.send without a Python frame
 * between, and only what these leave (see CRing.send) calls the ring's
 * Python steps: _next_frame(shape) and _preprocess(frame). */

typedef struct {
	PyObject_HEAD PyObject *ring; /* the ring's CRing (ring.py sets it) */
} RingCoreObject;

PyObject *RingCore_type, *RingResultCore_type;
static PyObject *native_next_frame_name, *native_preprocess_name;

static int native_core_names(void)
{
	if (native_preprocess_name != NULL)
		return 0;
	native_next_frame_name = PyUnicode_InternFromString("_next_frame");
	native_preprocess_name = PyUnicode_InternFromString("_preprocess");
	return native_preprocess_name != NULL ? 0 : -1;
}

/* native_ring_of is the CRing of ring (a RingCore), or NULL (no error)
 * when it has none. */
static PyObject *native_ring_of(PyObject *ring)
{
	PyObject *s = ((RingCoreObject *)ring)->ring;

	return s != NULL && Py_TYPE(s) == (PyTypeObject *)CRing_type ? s : NULL;
}

/* Ring.next_frame(shape=None): CRing.next_frame's frame, else
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
	s = native_ring_of(op);
	if (shape == Py_None && s != NULL) {
		f = CRing_next_frame(s, op);
		if (f != Py_None)
			return f; /* the frame, or NULL: its error */
		Py_DECREF(f);
	}
	return PyObject_CallMethodObjArgs(op, native_next_frame_name, shape,
	                                  NULL);
}

/* Ring.preprocess(frame): CRing.send's result, else
 * ring._preprocess(frame) (it took nothing). */
static PyObject *RingCore_preprocess(PyObject *op, PyObject *frame)
{
	PyObject *s, *got, *args[2];

	if (native_core_names())
		return NULL;
	s = native_ring_of(op);
	if (s != NULL) {
		args[0] = frame;
		args[1] = op;
		got = CRing_send(s, args, 2);
		if (got != Py_None)
			return got; /* the result, or NULL: its error */
		Py_DECREF(got);
	}
	return PyObject_CallMethodObjArgs(op, native_preprocess_name, frame,
	                                  NULL);
}

static PyObject *RingCore_get_ring(PyObject *op, void *c)
{
	PyObject *s = ((RingCoreObject *)op)->ring;

	(void)c;
	if (s == NULL) {
		PyErr_SetString(PyExc_AttributeError, "_c");
		return NULL;
	}
	Py_INCREF(s);
	return s;
}

static int RingCore_set_ring(PyObject *op, PyObject *v, void *c)
{
	PyObject *old = ((RingCoreObject *)op)->ring;

	(void)c;
	Py_XINCREF(v);
	((RingCoreObject *)op)->ring = v;
	Py_XDECREF(old);
	return 0;
}

static void RingCore_dealloc(PyObject *op)
{
	PyTypeObject *tp = Py_TYPE(op);
	freefunc free_fn = (freefunc)PyType_GetSlot(tp, Py_tp_free);

	Py_CLEAR(((RingCoreObject *)op)->ring);
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
        {"_c", RingCore_get_ring, RingCore_set_ring, "The ring's CRing.", NULL},
        {NULL, NULL, NULL, NULL, NULL}};

static PyType_Slot RingCore_slots[] = {
        {Py_tp_new, PyType_GenericNew},
        {Py_tp_dealloc, RingCore_dealloc},
        {Py_tp_methods, RingCore_methods},
        {Py_tp_getset, RingCore_getset},
        {Py_tp_doc, "The base of ring.Ring: its per-frame calls in C."},
        {0, NULL}};

PyType_Spec RingCore_spec = {
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

PyType_Spec RingResultCore_spec = {"frameprep._native.RingResultCore", 0, 0,
                                   Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
                                   RingResultCore_slots};
