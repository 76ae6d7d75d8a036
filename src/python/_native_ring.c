/*
 * _native_ring.c: a ring's whole frames in one call: Slots.arm,
 * Slots.next_frame and Slots.send (a frame through its slot's doorbell
 * entry, the gate and the slot table in C), the RingFrame, RingResult
 * and Timings instances made without calling their classes, and Slots'
 * method table.
 */
#include "_native.h"

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
PyObject *native_frame_cls, *native_result_cls, *native_timings_cls;
static PyObject *native_limits_name;
const char *const native_result_names[] = {
        "_hold",       "_tensor", "request_id", "_res",    "_src_width",
        "_src_height", "_reply",  "_transform", "_timings"};
PyObject *native_result_attr[9];
static const char *const native_timings_names[] = {
        "queue_us", "compute_us", "h2d_us",   "kernel_us",
        "d2h_us",   "total_us",   "decode_us"};
static PyObject *native_timings_attr[7];

/* Where each attribute of native_result_names and native_timings_names
 * lies in an instance of its class (a __slots__ member: an object pointer
 * at a fixed offset), as native_find_slots found it; -1: set through
 * PyObject_GenericSetAttr. */
Py_ssize_t native_result_off[9], native_timings_off[7];

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
PyObject *native_set_ring_classes(PyObject *self, PyObject *args)
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
PyObject *Slots_next_frame(PyObject *op, PyObject *ring)
{
	SlotsObject *self = (SlotsObject *)op;
	HoldObject *h;
	uint64_t ticket = 0;
	unsigned k = 0;
	int got = 0;
	PyObject *a;

	if (self->arm_map == NULL)
		Py_RETURN_NONE;
	got = native_pop(self, SLOT_RESERVED, &k, &ticket);
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
PyObject *Slots_send(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
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
	if (fprep_client_conn_lost(c->client) != ro->lost) {
		native_leave(c); /* the daemon forgot the region */
		goto done;
	}
	if (gate != NULL && !fprep_gate_take(((GateObject *)gate)->g, 0)) {
		native_leave(c); /* no token at once: ring.py waits */
		goto done;
	}
	if (hold != NULL) {
		ok = hold->slots == op &&
		     fprep_slots_step(self->t, k, ticket, SLOT_RESERVED,
		                      SLOT_TAKEN, 0);
		if (ok)
			hold->slots = NULL; /* (GIL held) */
	} else {
		ok = native_pop(self, SLOT_TAKEN, &k, &ticket);
	}
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
	lost = err > 0 && fprep_client_conn_lost(c->client) != ro->lost;
	if (err > 0)
		snprintf(why, sizeof(why), "%s",
		         fprep_client_last_error(c->client));
	native_leave(c);
	if (gate != NULL)
		fprep_gate_give(((GateObject *)gate)->g);
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
PyObject *native_timings(PyObject *self, PyObject *arg)
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
PyObject *native_address(PyObject *self, PyObject *arg)
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
PyObject *native_tensor(PyObject *self, PyObject *arg)
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
	ok = native_pop(self, SLOT_TAKEN, &k, &ticket);
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

PyType_Spec Slots_spec = {"frameprep._native.Slots", sizeof(SlotsObject), 0,
                          Py_TPFLAGS_DEFAULT, Slots_slots};
