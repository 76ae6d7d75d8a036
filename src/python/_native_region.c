/*
 * _native_region.c: Region (a shared-memory fprep_region, its doorbell and
 * the requests prepared for its entries), Client's method table, the wait
 * in slices that lets signal handlers run, and Gate (fprep_gate: the cap
 * on one connection's requests in flight).
 */
#include "_native.h"

/* ---- Region: shared memory registered with the daemon ---- */

PyObject *Region_type;

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
	lost = fprep_client_conn_lost(self->client);
	Py_BEGIN_ALLOW_THREADS err =
	        fprep_region_open(&r, self->client, (size_t)size);
	Py_END_ALLOW_THREADS if (native_leave_err(self, err)) return NULL;
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
	Py_END_ALLOW_THREADS if (native_leave_err(c, err)) return NULL;
	Py_RETURN_NONE;
}

/* native_region_args parses Region.request's arguments (entry, request,
 * in_offset, out_offset, out_capacity, span, format, width, height,
 * stride, uv_stride, u_offset, v_offset) into the request *req of entry
 * *k in the region; raises ClosedError once it was closed. */
static int native_region_args(RegionObject *self, PyObject *args, unsigned *k,
                              fprep_request *req)
{
	unsigned long long in_off, out_off, out_cap;
	PyObject *tmpl;
	struct native_src s;

	if (self->r == NULL) {
		native_raise(FPREP_ECLOSED, "the region was closed");
		return -1;
	}
	s.src = NULL;
	if (!PyArg_ParseTuple(args, "IO!KKKKIIIIIII", k, Request_type, &tmpl,
	                      &in_off, &out_off, &out_cap, &s.span, &s.fmt,
	                      &s.w, &s.h, &s.stride, &s.uvs, &s.uoff, &s.voff))
		return -1;
	*req = ((RequestObject *)tmpl)->req;
	native_set_source(req, &s);
	fprep_request_set_regions(req, self->r, in_off, self->r, out_off,
	                          out_cap);
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
	Py_END_ALLOW_THREADS return native_settle(c, err, &res);
}

/* Region.request(entry, request, in_offset, out_offset, out_capacity,
 * span, format, width, height, stride, uv_stride, u_offset, v_offset):
 * the request's options for a frame and a tensor in this region
 * (fprep_region_request). */
static PyObject *Region_request(PyObject *op, PyObject *args)
{
	fprep_request req;
	unsigned k;

	if (native_region_args((RegionObject *)op, args, &k, &req))
		return NULL;
	return native_region_send((RegionObject *)op, k, &req);
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

	if (native_region_args(self, args, &k, &req))
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
		fprep_region_forget(self->r); /* the child's mapping only */
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
			fprep_region_forget(self->r);
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

PyType_Spec Region_spec = {"frameprep._native.Region", sizeof(RegionObject), 0,
                           Py_TPFLAGS_DEFAULT, Region_slots};

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

PyType_Spec Client_spec = {"frameprep._native.Client", sizeof(ClientObject), 0,
                           Py_TPFLAGS_DEFAULT, Client_slots};

int native_wait(double timeout, int (*take)(void *, unsigned), void *arg)
{
	struct timespec now, start;
	double left;
	int got;

	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		if (PyErr_CheckSignals())
			return NATIVE_WAIT_RAISED;
		clock_gettime(CLOCK_MONOTONIC, &now);
		left = timeout - (double)(now.tv_sec - start.tv_sec) -
		       (double)(now.tv_nsec - start.tv_nsec) * 1e-9;
		if (left <= 0)
			return 0;
		Py_BEGIN_ALLOW_THREADS got = take(
		        arg, left > 0.1 ? 100 : (unsigned)(left * 1e3) + 1);
		Py_END_ALLOW_THREADS if (got != 0 || left <= 0.1) return got;
	}
}

/* ---- Gate: the tokens of a cap on one connection's requests in flight
 * (the daemon's max_inflight_per_conn; fprep_gate) ----
 *
 * Client calls take a token before a request and give it back after its
 * reply; Slots.send takes and gives them in C, without a Python call. */

PyObject *Gate_type;

/* native_gate_take is native_wait's take for Gate.take. */
static int native_gate_take(void *g, unsigned ms)
{
	return fprep_gate_take(g, ms);
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
	if (fprep_gate_alloc(&self->g, n)) {
		Py_DECREF(self);
		return PyErr_NoMemory();
	}
	return (PyObject *)self;
}

static void Gate_dealloc(PyObject *op)
{
	GateObject *self = (GateObject *)op;
	PyTypeObject *tp = Py_TYPE(op);
	freefunc free_fn = (freefunc)PyType_GetSlot(tp, Py_tp_free);

	fprep_gate_free(self->g);
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
	got = fprep_gate_take(self->g, 0);
	if (!got && timeout > 0)
		got = native_wait(timeout, native_gate_take, self->g);
	if (got == NATIVE_WAIT_RAISED)
		return NULL;
	return PyBool_FromLong(got);
}

static PyObject *Gate_try_take(PyObject *op, PyObject *unused)
{
	(void)unused;
	return PyBool_FromLong(fprep_gate_take(((GateObject *)op)->g, 0));
}

static PyObject *Gate_give(PyObject *op, PyObject *unused)
{
	(void)unused;
	fprep_gate_give(((GateObject *)op)->g);
	Py_RETURN_NONE;
}

static PyObject *Gate_get_tokens(PyObject *op, void *c)
{
	(void)c;
	return PyLong_FromLong(fprep_gate_tokens(((GateObject *)op)->g));
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

PyType_Spec Gate_spec = {"frameprep._native.Gate", sizeof(GateObject), 0,
                         Py_TPFLAGS_DEFAULT, Gate_slots};
