/*
 * _native_client.c: Client (an fprep_client shared by Python threads, its
 * calls counted so that close() waits for them, refused in a forked
 * child) and Pending (an fprep_pending whose done callback calls Python).
 */
#include "_native.h"

/* ---- Client ---- */

PyObject *Client_type;

/* Forks since the module was loaded (counted in the child). A Client the
 * parent opened is the parent's: in a child its calls raise EFORKED before
 * they take its lock (a thread of the parent may have held it at the
 * fork, and its calls in progress never end there), and closing it only
 * forgets it. */
static _Atomic unsigned native_fork_gen;

void native_fork_child(void)
{
	atomic_fetch_add_explicit(&native_fork_gen, 1, memory_order_relaxed);
}

int native_forked(const ClientObject *c)
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
int native_enter(ClientObject *c)
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

void native_leave(ClientObject *c)
{
	pthread_mutex_lock(&c->mtx);
	if (--c->calls == 0)
		pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mtx);
}

/* native_fail raises err with the client's last error sentence. */
PyObject *native_fail(ClientObject *c, int err)
{
	const char *text = fprep_client_last_error(c->client);

	return native_raise(err, text);
}

/* native_leave_err ends a call that native_enter counted; with err, raises
 * it with the client's last error sentence first. Returns err. */
int native_leave_err(ClientObject *c, int err)
{
	if (err)
		native_fail(c, err);
	native_leave(c);
	return err;
}

/* native_settle ends a call that native_enter counted: raises err as
 * native_leave_err does, or returns res (owned) as a Result. */
PyObject *native_settle(ClientObject *c, int err, fprep_result *res)
{
	if (native_leave_err(c, err))
		return NULL;
	return native_result_new(res);
}

int Client_init(PyObject *op, PyObject *args, PyObject *kw)
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

PyObject *Client_new(PyTypeObject *tp, PyObject *args, PyObject *kw)
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

PyObject *Client_close(PyObject *op, PyObject *unused)
{
	(void)unused;
	Py_BEGIN_ALLOW_THREADS native_close((ClientObject *)op);
	Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

void Client_dealloc(PyObject *op)
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

void native_set_source(fprep_request *req, const struct native_src *s)
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

/* native_set_output sets where req's tensor goes: out_loc (INLINE, SHM
 * or CUDA), and in a region, at out_off of region out_region, out_cap
 * bytes there. */
static void native_set_output(fprep_request *req, unsigned char out_loc,
                              unsigned out_region, unsigned long long out_off,
                              unsigned long long out_cap)
{
	req->output_loc = out_loc;
	req->out_region = out_region;
	req->out_offset = out_off;
	req->out_capacity = out_cap;
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
	Py_END_ALLOW_THREADS return native_settle(self, err, &res);
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
PyObject *Client_frame(PyObject *op, PyObject *args)
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
	native_set_output(&req, out_loc, out_region, out_off, out_cap);
	return native_request((ClientObject *)op, &req, addr);
}

/* Client.request(request, payload=None): any request as it is (a
 * register kind through fprep_client_register); payload (bytes or a
 * numpy array) holds an inline FRAME's or ECHO's input_size bytes
 * (ValueError when it holds fewer). */
PyObject *Client_request(PyObject *op, PyObject *args)
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
	Py_END_ALLOW_THREADS return native_settle(self, err, &res);
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
		if (fprep_element_check(req, (uint32_t)k, &els[k], &span, why,
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
PyObject *Client_elements(PyObject *op, PyObject *args)
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
	native_set_output(&req, out_loc, out_region, out_off, out_cap);
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
	return native_settle(self, err, &res);
}

PyObject *Client_info(PyObject *op, PyObject *unused)
{
	ClientObject *self = (ClientObject *)op;
	fprep_result res;
	int err;

	(void)unused;
	if (native_enter(self))
		return NULL;
	Py_BEGIN_ALLOW_THREADS err = fprep_client_info(self->client, &res);
	Py_END_ALLOW_THREADS return native_settle(self, err, &res);
}

PyObject *Client_set_staging(PyObject *op, PyObject *arg)
{
	ClientObject *self = (ClientObject *)op;
	int on = PyObject_IsTrue(arg);

	if (on < 0 || native_enter(self))
		return NULL;
	fprep_client_set_staging(self->client, on);
	native_leave(self);
	Py_RETURN_NONE;
}

PyObject *Client_set_spin(PyObject *op, PyObject *arg)
{
	ClientObject *self = (ClientObject *)op;
	unsigned long us = PyLong_AsUnsignedLong(arg);

	if ((us == (unsigned long)-1 && PyErr_Occurred()) || native_enter(self))
		return NULL;
	fprep_client_set_spin(self->client, (unsigned)us);
	native_leave(self);
	Py_RETURN_NONE;
}

PyObject *Client_conn_lost(PyObject *op, PyObject *unused)
{
	ClientObject *self = (ClientObject *)op;
	uint64_t n;

	(void)unused;
	if (native_enter(self))
		return NULL;
	n = fprep_client_conn_lost(self->client);
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

PyObject *Pending_type;

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
PyObject *Client_submit(PyObject *op, PyObject *args)
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

PyType_Spec Pending_spec = {"frameprep._native.Pending", sizeof(PendingObject),
                            0, Py_TPFLAGS_DEFAULT, Pending_slots};
