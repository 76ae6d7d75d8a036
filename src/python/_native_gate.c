/*
 * _native_gate.c: Client's method table, the wait in slices that lets
 * signal handlers run, and Gate (fprep_gate: the cap on one connection's
 * requests in flight).
 */
#include "_native.h"

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
 * reply; a ring's requests take theirs in C (fprep_ring_send). */

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
