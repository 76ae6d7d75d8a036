/*
 * _native_hold.c: Hold (what holds a ring's slot: a reserved frame or a
 * result's tensor, seen by numpy through __array_struct__; the slot goes
 * back when the last view is gone), and CRing's slot table (take,
 * release, claim, states) and layout of a slot's arrays.
 */
#include "_native.h"

/* NPY_ARRAY_C_CONTIGUOUS, ALIGNED, NOTSWAPPED and WRITEABLE. */
#define NATIVE_ARRAY_FLAGS (0x1 | 0x100 | 0x200 | 0x400)

PyObject *Hold_type;

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

/* CRing.layout(frame_shape, tensor_shape, typekind, itemsize, on_free):
 * the arrays over a slot's frame (uint8, at most the ring's frame bytes)
 * and tensor (of typekind and itemsize 'u' 1, 'f' 4 or 'f' 2, at most its
 * tensor bytes): ValueError otherwise; and what to call (GIL held, any
 * thread; None: nothing) when a slot comes free. */
PyObject *CRing_layout(PyObject *op, PyObject *args)
{
	CRingObject *self = (CRingObject *)op;
	unsigned long long fbytes, tbytes;
	Py_intptr_t fshape[4], tshape[4];
	int kind, itemsize, fnd, tnd;
	PyObject *fs, *ts, *cb, *old;

	if (!PyArg_ParseTuple(args, "O!O!CiO", &PyTuple_Type, &fs,
	                      &PyTuple_Type, &ts, &kind, &itemsize, &cb))
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
	    fbytes > self->frame_bytes || tbytes > self->tensor_bytes) {
		PyErr_SetString(
		        PyExc_ValueError,
		        "layout: the frame or the tensor is larger than "
		        "the ring's slot");
		return NULL;
	}
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

/* native_pop takes a lease on the least recently freed slot in state
 * for the calling thread at once: 1, or 0 when none is free or the ring
 * is closed. */
int native_pop(CRingObject *self, int state, fprep_ring_lease *lease)
{
	/* A slot in flight has no holder (fprep_slots_take's mine). */
	unsigned long me =
	        state == SLOT_RESERVED ? PyThread_get_thread_ident() : 0;

	return fprep_ring_take(self->ring, state, me, 0, 0, lease) == 0;
}

/* native_free gives the lease's slot back when it is still its turn (and,
 * when only_reserved, reserved); returns whether it did. */
int native_free(CRingObject *self, const fprep_ring_lease *lease,
                int only_reserved)
{
	return only_reserved ? fprep_ring_cancel(self->ring, lease)
	                     : fprep_ring_release(self->ring, lease);
}

/* native_freed calls on_free after a slot came free (GIL held; an
 * exception being raised is kept aside meanwhile: Python code must not
 * run with one set). */
void native_freed(CRingObject *self)
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

/* native_slot_take is native_wait's take for CRing.take: a lease of
 * t->self in t->lease in state t->state: 1; -1 when the ring is closed;
 * -2 when t->mine and every slot is reserved or held by thread t->me;
 * else 0. */
struct native_slot_take {
	CRingObject *self;
	int state, mine;
	unsigned long me;
	fprep_ring_lease lease;
};

static int native_slot_take(void *t_, unsigned ms)
{
	struct native_slot_take *t = t_;

	switch (fprep_ring_take(t->self->ring, t->state, t->me, t->mine, ms,
	                        &t->lease)) {
	case 0:
		return 1;
	case FPREP_ECLOSED:
		return -1;
	case FPREP_EBUSY:
		return -2;
	default:
		return 0;
	}
}

/* native_lease_of parses a lease (slot, ticket, epoch) of self. */
static int native_lease_of(CRingObject *self, PyObject *args,
                           fprep_ring_lease *lease)
{
	unsigned long long ticket, epoch;

	if (!PyArg_ParseTuple(args, "IKK", &lease->slot, &ticket, &epoch))
		return -1;
	if (lease->slot >= self->n) {
		PyErr_Format(PyExc_IndexError, "slot %u: the ring has %u slots",
		             lease->slot, self->n);
		return -1;
	}
	lease->ticket = ticket;
	lease->epoch = epoch;
	return 0;
}

/* CRing.take(state, timeout_s, mine=True): takes a lease on the least
 * recently freed slot in state (1 reserved, 2 taken): (slot, ticket,
 * epoch), waiting up to timeout_s (GIL released) for one; None when none
 * came; False at once, with mine, when every slot is reserved or held by
 * the calling thread (none free, none in flight: none would come).
 * ClosedError once closed. */
PyObject *CRing_take(PyObject *op, PyObject *args)
{
	CRingObject *self = (CRingObject *)op;
	struct native_slot_take t = {.self = self, .mine = 1};
	double timeout;
	int got;

	if (!PyArg_ParseTuple(args, "id|p", &t.state, &timeout, &t.mine))
		return NULL;
	t.me = PyThread_get_thread_ident();
	if (t.state != SLOT_RESERVED && t.state != SLOT_TAKEN)
		return native_raise(FPREP_EINVAL, "no such slot state");
	got = native_slot_take(&t, 0);
	if (got == 0 && timeout > 0)
		got = native_wait(timeout, native_slot_take, &t);
	if (got == NATIVE_WAIT_RAISED)
		return NULL;
	if (got == -2)
		Py_RETURN_FALSE;
	if (got < 0)
		return native_raise(FPREP_ECLOSED, "the ring was closed");
	if (got == 0)
		Py_RETURN_NONE;
	return Py_BuildValue("(IKK)", t.lease.slot,
	                     (unsigned long long)t.lease.ticket,
	                     (unsigned long long)t.lease.epoch);
}

/* CRing.release(slot, ticket, epoch): gives the lease's slot back unless
 * it was since (its ticket changed); returns whether it did. */
PyObject *CRing_release(PyObject *op, PyObject *args)
{
	CRingObject *self = (CRingObject *)op;
	fprep_ring_lease lease;
	int freed;

	if (native_lease_of(self, args, &lease))
		return NULL;
	freed = native_free(self, &lease, 0);
	if (freed)
		native_freed(self);
	return PyBool_FromLong(freed);
}

/* CRing.states(): each slot's (state, ticket): 0 free, 1 reserved, 2 in
 * flight, 3 held. */
PyObject *CRing_states(PyObject *op, PyObject *unused)
{
	CRingObject *self = (CRingObject *)op;
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
	fprep_slots_states(self->t, st, tk);
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

/* CRing.free(): the free slots, least recently freed first. */
PyObject *CRing_free(PyObject *op, PyObject *unused)
{
	CRingObject *self = (CRingObject *)op;
	unsigned ks[4096], n, i;
	PyObject *list;

	(void)unused;
	n = fprep_slots_free_list(self->t, ks, 4096);
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

/* native_hold_new makes the holder of the lease's slot (lease->slot <
 * n) of ring owner: of its frame (what 0) or its tensor (what 1), in the
 * registration the lease names. On failure the slot is given back. */
HoldObject *native_hold_new(CRingObject *self, const fprep_ring_lease *lease,
                            PyObject *owner, int what)
{
	HoldObject *h;
	int nd;
	const Py_intptr_t *shape;

	h = PyObject_New(HoldObject, (PyTypeObject *)Hold_type);
	if (h == NULL) {
		if (native_free(self, lease, 0))
			native_freed(self);
		return NULL;
	}
	Py_INCREF((PyObject *)self);
	h->ring = (PyObject *)self;
	Py_INCREF((PyObject *)self);
	h->keep = (PyObject *)self;
	Py_INCREF(owner);
	h->owner = owner;
	h->lease = *lease;
	h->what = what;
	h->released = 0;
	if (what == 1) /* in flight until now: held by this thread */
		fprep_ring_hold(self->ring, lease, PyThread_get_thread_ident());
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
		h->ai.data = fprep_ring_lease_frame(self->ring, lease);
		h->cap = self->frame_bytes;
	} else {
		h->ai.typekind = self->typekind;
		h->ai.itemsize = self->itemsize;
		nd = self->tensor_nd;
		shape = self->tensor_shape;
		h->ai.data = (void *)(uintptr_t)fprep_ring_lease_tensor(
		        self->ring, lease);
		h->cap = self->tensor_bytes;
	}
	native_set_shape(h, shape, nd);
	return h;
}

/* native_hold parses a lease (slot, ticket, epoch) and the Python ring
 * for native_hold_new. */
static PyObject *native_hold(CRingObject *self, PyObject *args, int what)
{
	fprep_ring_lease lease;
	PyObject *lease_args, *owner;

	if (!PyArg_ParseTuple(args, "O!O", &PyTuple_Type, &lease_args, &owner))
		return NULL;
	if (native_lease_of(self, lease_args, &lease))
		return NULL;
	return (PyObject *)native_hold_new(self, &lease, owner, what);
}

/* CRing.frame_hold((slot, ticket, epoch), ring): the holder of a reserved
 * lease's frame (take(1, ...)). IndexError for a slot beyond the ring. */
PyObject *CRing_frame_hold(PyObject *op, PyObject *args)
{
	return native_hold((CRingObject *)op, args, 0);
}

/* CRing.result_hold((slot, ticket, epoch), ring): the holder of a taken
 * lease's tensor, its reply in (as frame_hold); the slot is then held by
 * the calling thread. */
PyObject *CRing_result_hold(PyObject *op, PyObject *args)
{
	return native_hold((CRingObject *)op, args, 1);
}

/* CRing.claim(hold): whether hold is a frame reserved on this ring and
 * not yet sent: its slot is then taken (in flight), no more the
 * holder's. */
PyObject *CRing_claim(PyObject *op, PyObject *arg)
{
	CRingObject *self = (CRingObject *)op;
	HoldObject *h = (HoldObject *)arg;
	int ok = 0;

	if (Py_TYPE(arg) != (PyTypeObject *)Hold_type || h->ring != op)
		Py_RETURN_FALSE;
	if (fprep_ring_claim(self->ring, &h->lease)) {
		h->ring = NULL; /* (GIL held) */
		ok = 1;
	}
	if (ok)
		Py_DECREF(op);
	return PyBool_FromLong(ok);
}

/* native_let_go ends self's hold: its slot is given back (only when
 * reserved, with only_reserved). */
void native_let_go(HoldObject *self, int only_reserved)
{
	CRingObject *r = (CRingObject *)self->ring;

	if (r != NULL) {
		self->ring = NULL;
		if (native_free(r, &self->lease, only_reserved))
			native_freed(r);
		Py_DECREF((PyObject *)r);
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
PyObject *native_hold_array(HoldObject *self, PyObject *subtype)
{
	PyObject *op = (PyObject *)self;
	int type_num;

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
	return native_np_view(subtype, self->ai.nd, self->shape, type_num,
	                      self->strides, self->ai.data, self->ai.itemsize,
	                      0x1 | 0x100 | 0x400, op);
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

	if (self->ring != NULL) {
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
	Py_XDECREF(self->keep);
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
	if (self->ring == NULL)
		Py_RETURN_NONE;
	Py_INCREF(self->owner);
	return self->owner;
}

static PyObject *Hold_get_epoch(PyObject *op, void *c)
{
	(void)c;
	return PyLong_FromUnsignedLongLong(((HoldObject *)op)->lease.epoch);
}

static PyObject *Hold_get_address(PyObject *op, void *c)
{
	(void)c;
	return PyLong_FromUnsignedLongLong(
	        (uintptr_t)((HoldObject *)op)->ai.data);
}

static PyObject *Hold_get_slot(PyObject *op, void *c)
{
	(void)c;
	return PyLong_FromUnsignedLong(((HoldObject *)op)->lease.slot);
}

static PyObject *Hold_get_ticket(PyObject *op, void *c)
{
	(void)c;
	return PyLong_FromUnsignedLongLong(((HoldObject *)op)->lease.ticket);
}

static PyGetSetDef Hold_getset[] = {
        {"__array_struct__", Hold_get_struct, NULL,
         "The slot's frame or tensor, for numpy.", NULL},
        {"ring", Hold_get_ring, NULL,
         "The ring while the slot is held, else None.", NULL},
        {"epoch", Hold_get_epoch, NULL,
         "The ring's registration its memory lies in.", NULL},
        {"address", Hold_get_address, NULL,
         "The address of the frame or tensor.", NULL},
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

PyType_Spec Hold_spec = {"frameprep._native.Hold", sizeof(HoldObject), 0,
                         Py_TPFLAGS_DEFAULT, Hold_slots};
