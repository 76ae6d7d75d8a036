/*
 * _native_ring.c: CRing, a ring of frameprep/ring.h (fprep_ring) opened on
 * a Client: its slots' leases, the send of a slot's request and the wait
 * for its reply (GIL released), re-registration after a daemon restart
 * (all in C); and a ring's whole frames in one call (CRing.next_frame,
 * CRing.send), the RingFrame, RingResult and Timings instances made
 * without calling their classes.
 */
#include "_native.h"

/* ---- A ring's whole frames in one call (CRing.next_frame, send) ----
 *
 * CRing.next_frame reserves a slot and returns its RingFrame, and
 * CRing.send sends a whole frame (a reserved one as it lies, or a numpy
 * array of the frame's shape copied into a free slot) with the request
 * CRing.prepare kept, and returns the RingResult: what ring.py would do
 * in a dozen Python calls, done in one. Whatever else (a crop, a frame of
 * another shape, no free slot at once, no prepared request) is left to
 * ring.py: they return None, having taken nothing. */

/* The Python classes that the fast path makes (set_ring_classes):
 * RingFrame, RingResult and Timings, and the attribute names it sets. */
PyObject *native_frame_cls, *native_result_cls, *native_timings_cls;
static const char *const native_result_names[] = {
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
	if (native_result_attr[0] == NULL) {
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

PyObject *CRing_type;

/* CRing(client, slots, frame_bytes, tensor_bytes, doorbell, gate,
 * timeout_s): a ring of slots frames of frame_bytes and tensors of
 * tensor_bytes, registered on client (a Client) with a doorbell area
 * when doorbell (fprep_ring_open, GIL released); its requests take gate's
 * tokens (a Gate, or None), waiting up to timeout_s for one, and a
 * re-registration is retried for up to timeout_s. */
static PyObject *CRing_new(PyTypeObject *tp, PyObject *args, PyObject *kw)
{
	allocfunc alloc = (allocfunc)PyType_GetSlot(tp, Py_tp_alloc);
	fprep_ring_config cfg = {0};
	unsigned long long fbytes, tbytes;
	PyObject *client, *gate;
	fprep_ring *ring = NULL;
	CRingObject *self;
	ClientObject *c;
	double timeout;
	int doorbell, err;

	(void)kw;
	if (!PyArg_ParseTuple(args, "O!IKKpOd", Client_type, &client,
	                      &cfg.slots, &fbytes, &tbytes, &doorbell, &gate,
	                      &timeout))
		return NULL;
	if (gate != Py_None && Py_TYPE(gate) != (PyTypeObject *)Gate_type) {
		PyErr_SetString(PyExc_TypeError,
		                "CRing: gate is a Gate or None");
		return NULL;
	}
	if (cfg.slots < 1 || fbytes < 1 || tbytes < 1)
		return native_raise(
		        FPREP_EINVAL,
		        "a ring needs a slot, a frame and a tensor");
	cfg.frame_bytes = (size_t)fbytes;
	cfg.tensor_bytes = (size_t)tbytes;
	cfg.doorbell = doorbell;
	cfg.timeout_ms = timeout >= 4e6 ? 4000000000u
	                 : timeout > 0  ? (unsigned)(timeout * 1e3) + 1
	                                : 1;
	cfg.gate = gate != Py_None ? ((GateObject *)gate)->g : NULL;
	c = (ClientObject *)client;
	if (native_enter(c))
		return NULL;
	Py_BEGIN_ALLOW_THREADS err = fprep_ring_open(&ring, c->client, &cfg);
	Py_END_ALLOW_THREADS if (err)
	{
		native_fail(c, err);
		native_leave(c);
		return NULL;
	}
	native_leave(c);
	self = (CRingObject *)alloc(tp, 0);
	if (self == NULL) {
		fprep_ring_close(ring);
		return NULL;
	}
	self->ring = ring;
	self->t = fprep_ring_table(ring);
	Py_INCREF(client);
	self->client = client;
	if (gate != Py_None) {
		Py_INCREF(gate);
		self->gate = gate;
	}
	self->n = cfg.slots;
	self->frame_bytes = cfg.frame_bytes;
	self->tensor_bytes = cfg.tensor_bytes;
	return (PyObject *)self;
}

/* native_client_in enters c (GIL held) for a call made on a ring's
 * behalf without raising: 1, or 0 when c is closed or was inherited by
 * a forked child (its ring is then only forgotten). */
static int native_client_in(ClientObject *c)
{
	int open = 0;

	if (!native_forked(c)) {
		pthread_mutex_lock(&c->mtx);
		open = !c->closed;
		if (open)
			c->calls++;
		pthread_mutex_unlock(&c->mtx);
	}
	return open;
}

static void CRing_dealloc(PyObject *op)
{
	CRingObject *self = (CRingObject *)op;
	PyTypeObject *tp = Py_TYPE(op);
	freefunc free_fn = (freefunc)PyType_GetSlot(tp, Py_tp_free);
	ClientObject *c = (ClientObject *)self->client;

	if (self->ring != NULL && native_client_in(c)) {
		Py_BEGIN_ALLOW_THREADS fprep_ring_close(self->ring);
		Py_END_ALLOW_THREADS native_leave(c);
	} else {
		fprep_ring_forget(self->ring); /* no word to the daemon */
	}
	Py_XDECREF(self->on_free);
	Py_XDECREF(self->width);
	Py_XDECREF(self->height);
	Py_XDECREF(self->gate);
	Py_XDECREF(self->client);
	free_fn(op);
	Py_DECREF(tp);
}

/* CRing.close(): no slot is handed out any more (waiters: ClosedError),
 * no request is sent and the region is unregistered (best effort; GIL
 * released); the memory stays mapped while the object lives (holders
 * keep it). Again: no-op. */
static PyObject *CRing_close(PyObject *op, PyObject *unused)
{
	CRingObject *self = (CRingObject *)op;
	ClientObject *c = (ClientObject *)self->client;

	(void)unused;
	if (self->closed)
		Py_RETURN_NONE;
	self->closed = 1;
	if (!native_client_in(c)) {
		fprep_slots_close(self->t);
		Py_RETURN_NONE;
	}
	Py_BEGIN_ALLOW_THREADS fprep_ring_unregister(self->ring);
	Py_END_ALLOW_THREADS native_leave(c);
	Py_RETURN_NONE;
}

/* CRing.prepare(request, span, format, width, height, stride, uv_stride,
 * u_offset, v_offset): the request (a Request's options, with this
 * source) that send, next_frame's frames and bare use for a slot's whole
 * frame; prepare(None) drops it (send then leaves every frame to
 * ring.py). */
static PyObject *CRing_prepare(PyObject *op, PyObject *args)
{
	CRingObject *self = (CRingObject *)op;
	struct native_src s = {0};
	PyObject *tmpl, *w, *h;

	if (PyTuple_Size(args) == 1 && PyTuple_GetItem(args, 0) == Py_None) {
		self->whole.kind = 0;
		Py_RETURN_NONE;
	}
	if (!PyArg_ParseTuple(args, "O!KIIIIIII", Request_type, &tmpl, &s.span,
	                      &s.fmt, &s.w, &s.h, &s.stride, &s.uvs, &s.uoff,
	                      &s.voff))
		return NULL;
	if (s.span > self->frame_bytes)
		return native_raise(FPREP_EINVAL,
		                    "the frame is larger than a slot");
	w = PyLong_FromUnsignedLong(s.w);
	h = PyLong_FromUnsignedLong(s.h);
	if (w == NULL || h == NULL) {
		Py_XDECREF(w);
		Py_XDECREF(h);
		return NULL;
	}
	Py_XDECREF(self->width);
	self->width = w;
	Py_XDECREF(self->height);
	self->height = h;
	self->whole = ((RequestObject *)tmpl)->req;
	native_set_source(&self->whole, &s);
	Py_RETURN_NONE;
}

/* CRing.next_frame(ring): a free slot reserved, its whole frame as a
 * RingFrame of ring (a view of the slot's frame area); None when no slot
 * is free at once or the classes are not set. */
PyObject *CRing_next_frame(PyObject *op, PyObject *ring)
{
	CRingObject *self = (CRingObject *)op;
	fprep_ring_lease lease;
	HoldObject *h;
	PyObject *a;

	if (native_frame_cls == NULL || self->frame_nd == 0 ||
	    !native_pop(self, SLOT_RESERVED, &lease))
		Py_RETURN_NONE;
	h = native_hold_new(self, &lease, ring, 0);
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
static int native_is_frame(CRingObject *self, const struct native_np_array *a)
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

/* native_ring_result makes the RingResult of res for the lease's slot of
 * ring, which then holds the slot; on failure the slot is given back. */
static PyObject *native_ring_result(CRingObject *self,
                                    const fprep_ring_lease *lease,
                                    PyObject *ring, const fprep_result *res)
{
	PyTypeObject *tp = (PyTypeObject *)native_result_cls;
	allocfunc alloc = (allocfunc)PyType_GetSlot(tp, Py_tp_alloc);
	PyObject *v[9], *out = NULL, *r;
	HoldObject *h;

	r = native_result_new(res);
	if (r == NULL) {
		if (native_free(self, lease, 0))
			native_freed(self);
		return NULL;
	}
	h = native_hold_new(self, lease, ring, 1);
	if (h == NULL) {
		Py_DECREF(r);
		return NULL;
	}
	v[0] = (PyObject *)h;
	v[1] = Py_None;
	v[2] = PyLong_FromUnsignedLongLong(res->header.request_id);
	v[3] = r;
	v[4] = self->width;
	v[5] = self->height;
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

/* native_send_fail raises fprep_ring_send's error err: the ring's own
 * refusals (a stale lease, a frame past the slot, a closed ring) with
 * their reason, the request's with the client's last error. */
static void native_send_fail(ClientObject *c, int err)
{
	if (err == FPREP_EINVAL)
		native_raise(err,
		             "the ring refused the request: its slot is not "
		             "taken with the lease's ticket, or the frame "
		             "lies past the slot's frame area");
	else if (err == FPREP_ECLOSED)
		native_raise(err, "the ring was closed");
	else
		native_fail(c, err);
}

/* native_copy_send copies nbytes from src into the lease's frame, then
 * sends req for it and waits for the reply (fprep_ring_send; GIL
 * released by the caller). */
static int native_copy_send(fprep_ring *ring, fprep_ring_lease *lease,
                            fprep_request *req, fprep_result *res,
                            const void *src, size_t nbytes)
{
	if (nbytes)
		memcpy(fprep_ring_lease_frame(ring, lease), src, nbytes);
	return fprep_ring_send(ring, lease, req, 0, res);
}

/* CRing.send(frame, ring): sends a whole frame of ring (see above) with
 * the prepared request and returns its RingResult; None when it took
 * nothing (ring.py's path then). Raises the request's error (the slot
 * given back) otherwise. */
PyObject *CRing_send(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
{
	CRingObject *self = (CRingObject *)op;
	ClientObject *c = (ClientObject *)self->client;
	const struct native_np_array *fa;
	PyObject *frame, *ring;
	fprep_ring_lease lease;
	HoldObject *hold = NULL;
	PyTypeObject *tp;
	size_t nbytes = 0;
	fprep_request req;
	fprep_result res;
	int err;

	if (nargs != 2) {
		PyErr_SetString(PyExc_TypeError, "send(frame, ring)");
		return NULL;
	}
	frame = args[0];
	ring = args[1];
	if (self->whole.kind == 0 || self->closed || native_result_cls == NULL)
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
		if (hold->ring != op || hold->what != 0 ||
		    fa->data != hold->ai.data || !native_is_frame(self, fa))
			Py_RETURN_NONE;
		lease = hold->lease;
	} else if (tp == (PyTypeObject *)native_np_api[2] /* ndarray */) {
		if (!native_is_frame(self, fa))
			Py_RETURN_NONE;
		nbytes = 1;
		for (int i = 0; i < fa->nd; i++)
			nbytes *= (size_t)fa->dimensions[i];
	} else {
		Py_RETURN_NONE;
	}
	if (native_enter(c))
		return NULL;
	if (hold != NULL) {
		if (!fprep_ring_claim(self->ring, &lease)) {
			native_leave(c); /* stale: ring.py says why */
			Py_RETURN_NONE;
		}
		hold->ring = NULL; /* sent: no more the holder's (GIL held) */
		Py_DECREF(op);     /* the holder's reference */
	} else if (!native_pop(self, SLOT_TAKEN, &lease)) {
		native_leave(c); /* no free slot at once: ring.py waits */
		Py_RETURN_NONE;
	}
	req = self->whole;
	Py_BEGIN_ALLOW_THREADS err = native_copy_send(self->ring, &lease, &req,
	                                              &res, fa->data, nbytes);
	Py_END_ALLOW_THREADS if (err) native_send_fail(c, err);
	native_leave(c);
	if (err == 0 && res.header.status == 0)
		return native_ring_result(self, &lease, ring, &res);
	if (err == 0) {
		native_status_error(&res);
		fprep_result_fini(&res);
	}
	if (native_free(self, &lease, 0))
		native_freed(self);
	return NULL;
}

/* CRing.request((slot, ticket, epoch), request, frame_offset, span,
 * format, width, height, stride, uv_stride, u_offset, v_offset): sends
 * the request (a Request's options) for the frame lying frame_offset
 * bytes into the taken lease's frame area, with this source, and waits
 * for its reply in the slot (fprep_ring_send, GIL released):
 * (Result, epoch), epoch the registration its tensor lies in; the
 * daemon's status unchecked. Raises the request's error. */
static PyObject *CRing_request(PyObject *op, PyObject *args)
{
	CRingObject *self = (CRingObject *)op;
	ClientObject *c = (ClientObject *)self->client;
	unsigned long long ticket, epoch, offset;
	struct native_src s = {0};
	fprep_ring_lease lease;
	fprep_request req;
	fprep_result res;
	PyObject *tmpl;
	int err;

	if (!PyArg_ParseTuple(args, "(IKK)O!KKIIIIIII", &lease.slot, &ticket,
	                      &epoch, Request_type, &tmpl, &offset, &s.span,
	                      &s.fmt, &s.w, &s.h, &s.stride, &s.uvs, &s.uoff,
	                      &s.voff))
		return NULL;
	lease.ticket = ticket;
	lease.epoch = epoch;
	req = ((RequestObject *)tmpl)->req;
	native_set_source(&req, &s);
	if (native_enter(c))
		return NULL;
	Py_BEGIN_ALLOW_THREADS err =
	        fprep_ring_send(self->ring, &lease, &req, offset, &res);
	Py_END_ALLOW_THREADS if (err)
	{
		native_send_fail(c, err);
		native_leave(c);
		return NULL;
	}
	native_leave(c);
	return Py_BuildValue("(NK)", native_result_new(&res),
	                     (unsigned long long)lease.epoch);
}

/* CRing.frame_view(slot, epoch): a writable uint8 numpy array over slot's
 * whole frame area in the registration epoch (its base the CRing, which
 * keeps the memory mapped), for ring.py to copy a frame in. */
static PyObject *CRing_frame_view(PyObject *op, PyObject *args)
{
	CRingObject *self = (CRingObject *)op;
	fprep_ring_lease lease = {0};
	unsigned long long epoch;
	Py_intptr_t n = (Py_intptr_t)self->frame_bytes;

	if (!PyArg_ParseTuple(args, "IK", &lease.slot, &epoch))
		return NULL;
	if (lease.slot >= self->n) {
		PyErr_Format(PyExc_IndexError, "slot %u: the ring has %u slots",
		             lease.slot, self->n);
		return NULL;
	}
	lease.epoch = epoch;
	if (native_np_load())
		return NULL;
	return native_np_view(native_np_api[2], 1, &n, 2 /* NPY_UBYTE */, NULL,
	                      fprep_ring_lease_frame(self->ring, &lease), 1,
	                      0x1 | 0x100 | 0x400, op);
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
	return native_np_view(native_np_api[2], (int)h->ndim, shape, type_num,
	                      NULL, (void *)(uintptr_t)res->payload, size,
	                      flags | 0x1 /* C order */, arg);
}

/* CRing.bare(): the request of CRing.send for a frame already in its
 * slot, and nothing else: takes a free slot, sends the prepared request
 * as it lies (fprep_ring_send, GIL released), gives the slot back. Makes
 * no object: python -m frameprep.bench's "bare" path times a Python loop
 * around it, the floor under any binding's per-frame CPU. Returns None;
 * raises the request's error, or EINVAL when no request is prepared or no
 * slot is free. */
static PyObject *CRing_bare(PyObject *op, PyObject *unused)
{
	CRingObject *self = (CRingObject *)op;
	ClientObject *c = (ClientObject *)self->client;
	fprep_ring_lease lease;
	fprep_request req;
	fprep_result res;
	int err = FPREP_EINVAL;
	char why[256] = "the ring has no prepared request or free slot";

	(void)unused;
	if (self->whole.kind == 0 || self->closed)
		return native_raise(FPREP_EINVAL, "the ring has no prepared "
		                                  "request");
	if (native_enter(c))
		return NULL;
	if (native_pop(self, SLOT_TAKEN, &lease)) {
		req = self->whole;
		Py_BEGIN_ALLOW_THREADS err =
		        fprep_ring_send(self->ring, &lease, &req, 0, &res);
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
		if (native_free(self, &lease, 0))
			native_freed(self);
	}
	native_leave(c);
	if (err != 0)
		return native_raise(err, why);
	Py_RETURN_NONE;
}

static PyObject *CRing_get_epoch(PyObject *op, void *c)
{
	(void)c;
	return PyLong_FromUnsignedLongLong(
	        fprep_ring_epoch(((CRingObject *)op)->ring));
}

static PyObject *CRing_get_region_id(PyObject *op, void *c)
{
	(void)c;
	return PyLong_FromUnsignedLong(
	        fprep_ring_region_id(((CRingObject *)op)->ring));
}

static PyObject *CRing_get_doorbell(PyObject *op, void *c)
{
	(void)c;
	return PyBool_FromLong(fprep_ring_doorbell(((CRingObject *)op)->ring));
}

static PyObject *CRing_get_size(PyObject *op, void *c)
{
	(void)c;
	return PyLong_FromSize_t(fprep_ring_size(((CRingObject *)op)->ring));
}

static PyObject *CRing_get_base(PyObject *op, void *c)
{
	(void)c;
	return PyLong_FromUnsignedLongLong(
	        (uintptr_t)fprep_ring_tensor(((CRingObject *)op)->ring, 0));
}

static PyObject *CRing_get_prepared(PyObject *op, void *c)
{
	(void)c;
	return PyBool_FromLong(((CRingObject *)op)->whole.kind != 0);
}

static PyMethodDef CRing_methods[] = {
        {"layout", CRing_layout, METH_VARARGS,
         "layout(frame_shape, tensor_shape, typekind, itemsize, on_free)."},
        {"prepare", CRing_prepare, METH_VARARGS,
         "prepare(request, span, format, width, height, stride, uv_stride, "
         "u_offset, v_offset), or prepare(None): a whole frame's request."},
        {"take", CRing_take, METH_VARARGS,
         "take(state, timeout_s, mine=True) -> (slot, ticket, epoch), None "
         "(none came) or False (every slot is this thread's)."},
        {"release", CRing_release, METH_VARARGS,
         "release(slot, ticket, epoch) -> whether it was given back."},
        {"claim", CRing_claim, METH_O,
         "claim(hold): takes a reserved frame's slot for sending."},
        {"frame_hold", CRing_frame_hold, METH_VARARGS,
         "frame_hold((slot, ticket, epoch), ring) -> Hold."},
        {"result_hold", CRing_result_hold, METH_VARARGS,
         "result_hold((slot, ticket, epoch), ring) -> Hold."},
        {"frame_view", CRing_frame_view, METH_VARARGS,
         "frame_view(slot, epoch) -> the slot's frame area, uint8."},
        {"request", CRing_request, METH_VARARGS,
         "request((slot, ticket, epoch), request, frame_offset, span, "
         "format, width, height, stride, uv_stride, u_offset, v_offset) "
         "-> (Result, epoch)."},
        {"close", CRing_close, METH_NOARGS,
         "Hands out no slot and sends nothing any more; unregisters."},
        {"free", CRing_free, METH_NOARGS, "The free slots, a list."},
        {"states", CRing_states, METH_NOARGS,
         "Each slot's (state, ticket): 0 free, 1 reserved, 2 in flight, "
         "3 held."},
        {"next_frame", CRing_next_frame, METH_O,
         "next_frame(ring) -> RingFrame, or None."},
        {"send", (PyCFunction)(void (*)(void))CRing_send, METH_FASTCALL,
         "send(frame, ring) -> RingResult, or None."},
        {"bare", CRing_bare, METH_NOARGS,
         "bare(): a free slot's prepared request as it lies; no result."},
        {NULL, NULL, 0, NULL}};

static PyGetSetDef CRing_getset[] = {
        {"epoch", CRing_get_epoch, NULL,
         "The registration in use: 0, then one more per re-registration.",
         NULL},
        {"region_id", CRing_get_region_id, NULL,
         "The daemon's id of the region in use.", NULL},
        {"doorbell", CRing_get_doorbell, NULL,
         "Whether the daemon polls the doorbell area of the region in use.",
         NULL},
        {"size", CRing_get_size, NULL,
         "The region's bytes (the slots and the doorbell area).", NULL},
        {"base", CRing_get_base, NULL, "The address of the region in use.",
         NULL},
        {"prepared", CRing_get_prepared, NULL,
         "Whether a whole frame's request is prepared.", NULL},
        {NULL, NULL, NULL, NULL, NULL}};

static PyType_Slot CRing_slots[] = {
        {Py_tp_new, CRing_new},
        {Py_tp_dealloc, CRing_dealloc},
        {Py_tp_methods, CRing_methods},
        {Py_tp_getset, CRing_getset},
        {Py_tp_doc, "CRing(client, slots, frame_bytes, tensor_bytes, "
                    "doorbell, gate, timeout_s): fprep_ring (thread-safe)."},
        {0, NULL}};

PyType_Spec CRing_spec = {"frameprep._native.CRing", sizeof(CRingObject), 0,
                          Py_TPFLAGS_DEFAULT, CRing_slots};
