/*
 * _native_slots.c: Slots (a ring's fprep_slots slot table, its layout in
 * the region and its registration) and Hold (what holds a slot: a
 * reserved frame or a result's tensor, seen by numpy through
 * __array_struct__; the slot goes back when the last view is gone).
 */
#include "_native.h"

/* ---- Slots and Hold: a ring's slot table and what holds a slot ---- */

/* NPY_ARRAY_C_CONTIGUOUS, ALIGNED, NOTSWAPPED and WRITEABLE. */
#define NATIVE_ARRAY_FLAGS (0x1 | 0x100 | 0x200 | 0x400)

PyObject *Slots_type, *Hold_type;

PyObject *Slots_new(PyTypeObject *tp, PyObject *args, PyObject *kw)
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
	self->n = n;
	if (fprep_slots_alloc(&self->t, n)) {
		Py_DECREF((PyObject *)self);
		return PyErr_NoMemory();
	}
	return (PyObject *)self;
}

/* native_disarm drops the registration Slots.arm gave (GIL held):
 * next_frame and send leave every frame to ring.py until the next arm. */
void native_disarm(SlotsObject *self)
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

void Slots_dealloc(PyObject *op)
{
	SlotsObject *self = (SlotsObject *)op;
	PyTypeObject *tp = Py_TYPE(op);
	freefunc free_fn = (freefunc)PyType_GetSlot(tp, Py_tp_free);

	fprep_slots_free(self->t);
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
int native_slots_fit(const SlotsObject *self, PyObject *region)
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
PyObject *Slots_layout(PyObject *op, PyObject *args)
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

/* native_pop hands out the least recently freed slot in state to the
 * calling thread at once, its ticket in *ticket: 1, or 0 when none is
 * free or the table is closed. */
int native_pop(SlotsObject *self, int state, unsigned *k, uint64_t *ticket)
{
	/* A slot in flight has no holder (fprep_slots_take's mine). */
	unsigned long me =
	        state == SLOT_RESERVED ? PyThread_get_thread_ident() : 0;

	return fprep_slots_take(self->t, state, me, 0, 0, k, ticket) == 0;
}

/* native_free frees slot k when it is still handed out with ticket (and,
 * when only_reserved, reserved); returns whether it did. */
int native_free(SlotsObject *self, unsigned k, uint64_t ticket,
                int only_reserved)
{
	return fprep_slots_release(self->t, k, ticket, only_reserved);
}

/* native_freed calls on_free after a slot came free (GIL held; an
 * exception being raised is kept aside meanwhile: Python code must not
 * run with one set). */
void native_freed(SlotsObject *self)
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

/* native_slot_take is native_wait's take for Slots.take: a free slot
 * of t->self into t->k and t->ticket in state t->state: 1; -1 when the
 * table is closed; -2 when t->mine and every slot is reserved or held by
 * thread t->me; else 0. */
struct native_slot_take {
	SlotsObject *self;
	int state, mine;
	unsigned long me;
	unsigned k;
	uint64_t ticket;
};

static int native_slot_take(void *t_, unsigned ms)
{
	struct native_slot_take *t = t_;

	switch (fprep_slots_take(t->self->t, t->state, t->me, t->mine, ms,
	                         &t->k, &t->ticket)) {
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

/* Slots.take(state, timeout_s, mine=True): takes the least recently
 * freed slot in state (1 reserved, 2 taken): (slot, ticket), waiting up
 * to timeout_s (GIL released) for one; None when none came; False at
 * once, with mine, when every slot is reserved or held by the calling
 * thread (none free, none in flight: none would come). ClosedError once
 * closed. */
PyObject *Slots_take(PyObject *op, PyObject *args)
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
	return Py_BuildValue("(IK)", t.k, (unsigned long long)t.ticket);
}

/* Slots.release(slot, ticket): gives slot back unless it was since (its
 * ticket changed); returns whether it did. */
PyObject *Slots_release(PyObject *op, PyObject *args)
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
PyObject *Slots_close(PyObject *op, PyObject *unused)
{
	SlotsObject *self = (SlotsObject *)op;

	(void)unused;
	self->closed = 1;
	fprep_slots_close(self->t);
	native_disarm(self);
	Py_RETURN_NONE;
}

/* Slots.states(): each slot's (state, ticket): 0 free, 1 reserved, 2 in
 * flight, 3 held. */
PyObject *Slots_states(PyObject *op, PyObject *unused)
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

/* Slots.free(): the free slots, least recently freed first. */
PyObject *Slots_free(PyObject *op, PyObject *unused)
{
	SlotsObject *self = (SlotsObject *)op;
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

/* native_hold_new makes the holder of slot k (ticket) of ring owner in
 * the mapping map of region (a Region that native_slots_fit accepted for
 * this layout, and k < n): of its frame (what 0) or its tensor (what 1).
 * On failure the slot is given back. */
HoldObject *native_hold_new(SlotsObject *self, unsigned k, uint64_t ticket,
                            PyObject *owner, PyObject *map, PyObject *region,
                            int what)
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
		fprep_slots_step(self->t, k, ticket, SLOT_TAKEN, SLOT_HELD,
		                 PyThread_get_thread_ident());
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
PyObject *Slots_frame_hold(PyObject *op, PyObject *args)
{
	return native_hold((SlotsObject *)op, args, 0);
}

/* Slots.result_hold(slot, ticket, ring, map, region): the holder of
 * slot's tensor (as frame_hold). */
PyObject *Slots_result_hold(PyObject *op, PyObject *args)
{
	return native_hold((SlotsObject *)op, args, 1);
}

/* Slots.claim(hold): whether hold is a frame reserved on this table and
 * not yet sent: its slot is then taken (in flight), no more the
 * holder's. */
PyObject *Slots_claim(PyObject *op, PyObject *arg)
{
	SlotsObject *self = (SlotsObject *)op;
	HoldObject *h = (HoldObject *)arg;
	int ok = 0;

	if (Py_TYPE(arg) != (PyTypeObject *)Hold_type || h->slots != op)
		Py_RETURN_FALSE;
	if (fprep_slots_step(self->t, h->slot, h->ticket, SLOT_RESERVED,
	                     SLOT_TAKEN, 0)) {
		h->slots = NULL; /* (GIL held) */
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
PyObject *native_hold_array(HoldObject *self, PyObject *subtype)
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

PyType_Spec Hold_spec = {"frameprep._native.Hold", sizeof(HoldObject), 0,
                         Py_TPFLAGS_DEFAULT, Hold_slots};
