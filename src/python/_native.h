/*
 * _native.h: what the files of frameprep._native share: the objects' C
 * structs and the functions and types one file defines and another uses.
 * Private to the extension; it includes only the public headers of
 * libframeprep (include/frameprep).
 */
#ifndef FPREP_PY_NATIVE_H
#define FPREP_PY_NATIVE_H

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

#include "frameprep/frameprep.h"
#include "frameprep/ring.h"

/* Field tables: a struct's fields by name, type and offset, for the
 * conversions between dicts and the C structs. */
enum { F_U8, F_U16, F_U32, F_U64, F_F32, F_F32X3, F_U32X4, F_STR, F_BYTES };

struct native_field {
	const char *name;
	int type;
	size_t offset;
	size_t size; /* F_STR, F_BYTES: bytes of the array */
};

typedef struct {
	PyObject_HEAD int is_register;
	fprep_request req;
	fprep_register_request reg;
} RequestObject;

typedef struct {
	PyObject_HEAD fprep_result res;
	PyObject *owner; /* what the payload needs alive, or NULL */
} ResultObject;

typedef PyObject *(*native_np_new_fn)(PyTypeObject *, int, const Py_intptr_t *,
                                      int, const Py_intptr_t *, void *, int,
                                      int, PyObject *);

typedef int (*native_np_set_base_fn)(PyObject *, PyObject *);

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

typedef struct {
	PyObject_HEAD fprep_client *client;
	pthread_mutex_t mtx; /* calls and closed */
	pthread_cond_t cv;
	unsigned calls; /* blocking calls in progress */
	int closed;
	unsigned fork_gen; /* native_fork_gen when it was opened */
} ClientObject;

/* native_source sets the source fields of a FRAME request: the frame
 * (src: bytes, a numpy array, or None where the source is not inline) and
 * its span, format, size and planes. */
struct native_src {
	PyObject *src;
	unsigned long long span;
	unsigned fmt, w, h, stride, uvs, uoff, voff;
};

/* native_wait calls take(arg, ms), which waits up to ms milliseconds for
 * what it takes, with the GIL released, in slices of 100 ms between which
 * signal handlers run (a KeyboardInterrupt) as in a Python wait, until it
 * returns non-zero or timeout seconds passed. Returns what take returned,
 * 0 when the time ran out, or NATIVE_WAIT_RAISED when a signal's handler
 * raised (its error set). */
#define NATIVE_WAIT_RAISED (-100)

typedef struct {
	PyObject_HEAD fprep_gate *g;
} GateObject;

/* A slot is free, reserved (a frame handed out by next_frame, not yet
 * sent), taken (in flight) or held (by its result, or by numpy views of
 * the result's tensor, until the last of them is gone). A reserved or
 * held slot's holder is the thread that reserved it or made the result:
 * a thread that asks for a slot while every slot is reserved or held by
 * itself would wait for ever, and is told at once instead. */
enum {
	SLOT_FREE = FPREP_SLOT_FREE,
	SLOT_RESERVED = FPREP_SLOT_RESERVED,
	SLOT_TAKEN = FPREP_SLOT_TAKEN,
	SLOT_HELD = FPREP_SLOT_HELD
};

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

/* CRing: a ring (fprep_ring, frameprep/ring.h) opened on a client, with
 * what its Python ring keeps in C: the layout of the arrays over a slot's
 * frame and tensor, and the request for a slot's whole frame. */
typedef struct {
	PyObject_HEAD fprep_ring *ring; /* owned; freed with the object */
	fprep_slots *t;                 /* its slot table (thread-safe) */
	PyObject *client;               /* the ClientObject it was opened on */
	PyObject *gate;                 /* the GateObject it takes, or NULL */
	unsigned n;
	size_t frame_bytes, tensor_bytes; /* a slot's frame and tensor */
	int closed;                       /* close() was called (GIL held) */
	PyObject *on_free; /* called (GIL held) when a slot came free */
	/* CRing.layout: the frame's and the tensor's shapes and the
	 * tensor's type. */
	int frame_nd, tensor_nd;
	Py_intptr_t frame_shape[4], tensor_shape[4];
	char typekind;
	int itemsize;
	/* The request for a slot's whole frame (whole.kind 0: none), and
	 * its source's width and height (ints, for the result). */
	fprep_request whole;
	PyObject *width, *height;
} CRingObject;

typedef struct {
	PyObject_HEAD PyObject *ring; /* the CRingObject while the slot is
	                                 held; NULL once given back or sent */
	PyObject *keep;               /* the CRingObject: its memory stays
	                                 mapped while the hold lives */
	PyObject *owner;              /* the Python ring */
	fprep_ring_lease lease;       /* the slot's turn and registration */
	unsigned long long cap;       /* bytes from ai.data to the area's end */
	int what;     /* 0: a reserved frame, 1: a result's tensor */
	int released; /* its result was released: the slot goes back, without
	                 a warning, when the last array viewing it is gone */
	struct native_array_iface ai;
	Py_intptr_t shape[4], strides[4];
} HoldObject;

/* _native.c: the module, errors, field tables */
extern PyObject *native_factory;
PyObject *native_raise(int err, const char *text);
extern const struct native_field native_request_fields[];
extern const struct native_field native_register_fields[];
extern const struct native_field native_reply_fields[];
int native_from_dict(void *base, const struct native_field *fields, PyObject *d,
                     const char *what);
PyObject *native_to_dict(const void *base, const struct native_field *fields);
int native_is_register(unsigned kind);
int native_kind_of(PyObject *d, unsigned *kind);

/* _native_result.c: Request, Result, numpy arrays */
extern PyType_Spec Request_spec;
extern PyObject *Request_type;
extern PyObject *Result_type;
PyObject *native_result_new(const fprep_result *res);
extern PyType_Spec Result_spec;
extern void **native_np_api;
int native_np_load(void);
PyObject *native_np_view(PyObject *subtype, int nd, const Py_intptr_t *shape,
                         int type_num, const Py_intptr_t *strides, void *data,
                         int itemsize, int flags, PyObject *base);
int native_bytes_of(PyObject *src, const char *what, unsigned long long need,
                    const void **addr);

/* _native_rules.c: the module functions of the shared request rules */
int native_rules_add(PyObject *m);

/* _native_client.c: Client, Pending */
extern PyObject *Client_type;
void native_fork_child(void);
int native_forked(const ClientObject *c);
int native_enter(ClientObject *c);
void native_leave(ClientObject *c);
PyObject *native_fail(ClientObject *c, int err);
int Client_init(PyObject *op, PyObject *args, PyObject *kw);
PyObject *Client_new(PyTypeObject *tp, PyObject *args, PyObject *kw);
PyObject *Client_close(PyObject *op, PyObject *unused);
void Client_dealloc(PyObject *op);
void native_set_source(fprep_request *req, const struct native_src *s);
PyObject *Client_frame(PyObject *op, PyObject *args);
PyObject *Client_request(PyObject *op, PyObject *args);
PyObject *Client_elements(PyObject *op, PyObject *args);
PyObject *Client_info(PyObject *op, PyObject *unused);
PyObject *Client_set_staging(PyObject *op, PyObject *arg);
PyObject *Client_set_spin(PyObject *op, PyObject *arg);
PyObject *Client_conn_lost(PyObject *op, PyObject *unused);
extern PyObject *Pending_type;
PyObject *Client_submit(PyObject *op, PyObject *args);
extern PyType_Spec Pending_spec;

/* _native_gate.c: Client's methods, waits, Gate */
extern PyType_Spec Client_spec;
int native_wait(double timeout, int (*take)(void *, unsigned), void *arg);
extern PyObject *Gate_type;
extern PyType_Spec Gate_spec;

/* _native_hold.c: Hold, and CRing's slot table and layout */
extern PyObject *Hold_type;
int native_pop(CRingObject *self, int state, fprep_ring_lease *lease);
int native_free(CRingObject *self, const fprep_ring_lease *lease,
                int only_reserved);
void native_freed(CRingObject *self);
PyObject *CRing_layout(PyObject *op, PyObject *args);
PyObject *CRing_take(PyObject *op, PyObject *args);
PyObject *CRing_release(PyObject *op, PyObject *args);
PyObject *CRing_states(PyObject *op, PyObject *unused);
PyObject *CRing_free(PyObject *op, PyObject *unused);
HoldObject *native_hold_new(CRingObject *self, const fprep_ring_lease *lease,
                            PyObject *owner, int what);
PyObject *CRing_frame_hold(PyObject *op, PyObject *args);
PyObject *CRing_result_hold(PyObject *op, PyObject *args);
PyObject *CRing_claim(PyObject *op, PyObject *arg);
void native_let_go(HoldObject *self, int only_reserved);
PyObject *native_hold_array(HoldObject *self, PyObject *subtype);
extern PyType_Spec Hold_spec;

/* _native_ring.c: CRing, and a ring's whole frames in one call */
extern PyObject *CRing_type;
extern PyObject *native_frame_cls, *native_result_cls, *native_timings_cls;
extern PyObject *native_result_attr[9];
extern Py_ssize_t native_result_off[9], native_timings_off[7];
PyObject *native_set_ring_classes(PyObject *self, PyObject *args);
PyObject *CRing_next_frame(PyObject *op, PyObject *ring);
PyObject *CRing_send(PyObject *op, PyObject *const *args, Py_ssize_t nargs);
PyObject *native_timings(PyObject *self, PyObject *arg);
PyObject *native_address(PyObject *self, PyObject *arg);
PyObject *native_tensor(PyObject *self, PyObject *arg);
extern PyType_Spec CRing_spec;

/* _native_ring_core.c: RingCore, RingResultCore */
extern PyObject *RingCore_type, *RingResultCore_type;
extern PyType_Spec RingCore_spec;
extern PyType_Spec RingResultCore_spec;

/* _native_video.c: Stream, StreamTensor, Demux */
extern PyObject *Stream_type, *StreamTensor_type, *Demux_type;
extern PyType_Spec Stream_spec, StreamTensor_spec, Demux_spec;

#endif /* FPREP_PY_NATIVE_H */
