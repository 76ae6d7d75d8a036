/*
 * _native_video.c: video streams and the demuxer for frameprep.video: the
 * types Stream (fprep_stream_*: a stream on a Client), StreamTensor (the
 * tensor of a stream reply's frames, for numpy) and Demux (fprep_demux_*:
 * a file's access units).
 *
 * A Stream keeps its Client referenced and makes each call between
 * native_enter and native_leave, so the client is not closed under it;
 * once the client is closed the stream cannot be closed on the daemon (its
 * connection is gone, and the daemon dropped it with the connection): the
 * library's stream object is then freed without a request
 * (fprep_stream_drop), as in a child made by fork. A Stream and a Demux are
 * used by one thread at a time (the Python class's contract); the GIL is
 * released around each call. Each send and flush names where its frames'
 * tensors go (the reply, or a region the package registered and knows by
 * its id: fprep_stream_set_output_id), so no call inherits the place of
 * the one before.
 */
#include "_native.h"
#include "frameprep/demux.h"

PyObject *Stream_type, *StreamTensor_type, *Demux_type;

typedef struct {
	PyObject_HEAD fprep_stream *st;
	PyObject *client; /* the ClientObject */
} StreamObject;

typedef struct {
	PyObject_HEAD PyObject *result; /* the ResultObject */
} StreamTensorObject;

typedef struct {
	PyObject_HEAD fprep_demux *d;
	fprep_demux_info info;
} DemuxObject;

/* Stream(client, request, codec, params=None): opens a stream of codec
 * (FPREP_PIX_H264 or FPREP_PIX_HEVC) on client with the tensor fields of
 * request (a FRAME Request: size, resize, dtype...), params (bytes of
 * Annex-B parameter sets) or None. Raises the daemon's refusal. */
static PyObject *Stream_new(PyTypeObject *tp, PyObject *args, PyObject *kw)
{
	static char *names[] = {"client", "request", "codec", "params", NULL};
	PyObject *client, *tmpl, *params = Py_None;
	unsigned codec;
	const void *paddr;
	size_t plen = 0;
	StreamObject *self;
	ClientObject *c;
	fprep_request spec;
	int err;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O!I|O", names,
	                                 Client_type, &client, Request_type,
	                                 &tmpl, &codec, &params))
		return NULL;
	if (codec != FPREP_PIX_H264 && codec != FPREP_PIX_HEVC) {
		PyErr_Format(PyExc_ValueError,
		             "codec %u: H264 (%d) or HEVC (%d)", codec,
		             FPREP_PIX_H264, FPREP_PIX_HEVC);
		return NULL;
	}
	if (params != Py_None) {
		if (!PyBytes_Check(params)) {
			PyErr_SetString(PyExc_TypeError,
			                "params: bytes or None");
			return NULL;
		}
		paddr = PyBytes_AsString(params);
		plen = (size_t)PyBytes_Size(params);
	} else {
		paddr = NULL;
	}
	/* The template's tensor; fprep_stream_open ignores its source. */
	spec = ((RequestObject *)tmpl)->req;
	spec.src_format = (uint16_t)codec;
	self = (StreamObject *)((allocfunc)PyType_GetSlot(tp, Py_tp_alloc))(tp,
	                                                                    0);
	if (self == NULL)
		return NULL;
	c = (ClientObject *)client;
	Py_INCREF(client);
	self->client = client;
	if (native_enter(c)) {
		Py_DECREF(self);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS err =
	        fprep_stream_open(c->client, &spec, paddr, plen, &self->st);
	Py_END_ALLOW_THREADS if (err)
	{
		native_fail(c, err);
		native_leave(c);
		Py_DECREF(self);
		return NULL;
	}
	native_leave(c);
	return (PyObject *)self;
}

/* struct stream_out: where a request's tensors go (fprep_stream_set_
 * output_id): loc INLINE (the reply), or capacity bytes at offset of
 * region, a registered region of the stream's client of location loc. */
struct stream_out {
	unsigned char loc;
	unsigned region;
	unsigned long long offset, capacity;
};

#define STREAM_OUT_FMT     "|bIKK"
#define STREAM_OUT_ARGS(o) &(o).loc, &(o).region, &(o).offset, &(o).capacity

/* stream_call runs send (packet not NULL) or flush on self without the
 * GIL, its tensors going where out says (each call sets it, so no call
 * inherits the place of the one before); returns the Result (the
 * daemon's status unchecked) or raises. */
static PyObject *stream_call(StreamObject *self, const void *packet,
                             size_t size, long long pts,
                             const struct stream_out *out)
{
	ClientObject *c = (ClientObject *)self->client;
	fprep_result res;
	int err;

	if (self->st == NULL)
		return native_raise(FPREP_ECLOSED, "the stream was closed");
	if (native_enter(c))
		return NULL;
	err = fprep_stream_set_output_id(self->st, out->loc, out->region,
	                                 out->offset, out->capacity);
	if (err)
		return native_settle(c, err, NULL);
	Py_BEGIN_ALLOW_THREADS err =
	        packet != NULL ? fprep_stream_send(self->st, packet, size,
	                                           (int64_t)pts, &res)
	                       : fprep_stream_flush(self->st, &res);
	Py_END_ALLOW_THREADS return native_settle(c, err, &res);
}

/* Stream.send(packet, pts, out_loc=0, out_region=0, out_offset=0,
 * out_capacity=0): one access unit (bytes, or a 1-D uint8 numpy array:
 * len() bytes are sent; not empty) with its pts; its frames' tensors in
 * the reply (out_loc INLINE, 0) or out_capacity bytes at out_offset of
 * the registered region out_region of location out_loc (SHM or CUDA),
 * frame k's at out_offset + k x the tensor's bytes. Returns the reply's
 * Result. */
static PyObject *Stream_send(PyObject *op, PyObject *args)
{
	struct stream_out out = {FPREP_LOC_INLINE, 0, 0, 0};
	PyObject *packet;
	long long pts;
	const void *addr;
	Py_ssize_t n;

	if (!PyArg_ParseTuple(args, "OL" STREAM_OUT_FMT, &packet, &pts,
	                      STREAM_OUT_ARGS(out)))
		return NULL;
	if (PyBytes_Check(packet))
		n = PyBytes_Size(packet);
	else if ((n = PyObject_Length(packet)) < 0)
		return NULL;
	if (native_bytes_of(packet, "packet", (unsigned long long)n, &addr))
		return NULL;
	if (n == 0 || addr == NULL) {
		PyErr_SetString(PyExc_ValueError, "packet: empty");
		return NULL;
	}
	return stream_call((StreamObject *)op, addr, (size_t)n, pts, &out);
}

/* Stream.flush(out_loc=0, out_region=0, out_offset=0, out_capacity=0):
 * the frames the decoder holds, their tensors where send's would go;
 * the reply's Result. */
static PyObject *Stream_flush(PyObject *op, PyObject *args)
{
	struct stream_out out = {FPREP_LOC_INLINE, 0, 0, 0};

	if (!PyArg_ParseTuple(args, STREAM_OUT_FMT, STREAM_OUT_ARGS(out)))
		return NULL;
	return stream_call((StreamObject *)op, NULL, 0, 0, &out);
}

/* stream_close ends the stream (see the opening comment for a closed
 * client); returns 0 or the error of the close. */
static int stream_close(StreamObject *self)
{
	ClientObject *c = (ClientObject *)self->client;
	fprep_stream *st = self->st;
	int err = 0;

	if (st == NULL)
		return 0;
	self->st = NULL;
	if (native_forked(c)) { /* the parent's client, and its stream */
		fprep_stream_drop(st);
		return 0;
	}
	pthread_mutex_lock(&c->mtx);
	if (c->closed) { /* the client, and with it the stream, is gone */
		pthread_mutex_unlock(&c->mtx);
		fprep_stream_drop(st);
		return 0;
	}
	c->calls++;
	pthread_mutex_unlock(&c->mtx);
	Py_BEGIN_ALLOW_THREADS err = fprep_stream_close(st);
	Py_END_ALLOW_THREADS native_leave(c);
	return err;
}

/* Stream.close(): ends the stream (frames still held are dropped); a
 * second close does nothing. Raises the daemon's or the transport's
 * error, the stream being closed all the same. */
static PyObject *Stream_close(PyObject *op, PyObject *unused)
{
	StreamObject *self = (StreamObject *)op;
	int err;

	(void)unused;
	err = stream_close(self);
	if (err)
		return native_fail((ClientObject *)self->client, err);
	Py_RETURN_NONE;
}

/* Stream.frames(result): the frame records of a stream reply that
 * succeeded: [(pts, width, height, scale_x, scale_y, pad_x, pad_y)], in
 * display order. */
static PyObject *Stream_frames(PyObject *op, PyObject *arg)
{
	const fprep_result *res;
	fprep_stream_frame f;
	PyObject *list, *item;

	(void)op;
	if (Py_TYPE(arg) != (PyTypeObject *)Result_type) {
		PyErr_SetString(PyExc_TypeError, "frames(result): a Result");
		return NULL;
	}
	res = &((ResultObject *)arg)->res;
	if ((list = PyList_New(0)) == NULL)
		return NULL;
	for (uint32_t k = 0; k < res->header.shape[0]; k++) {
		if (fprep_stream_recv(res, k, &f, NULL) != 0) {
			Py_DECREF(list);
			return native_raise(FPREP_EPROTO,
			                    "not a stream reply with frames");
		}
		item = Py_BuildValue("(LIIdddd)", (long long)f.pts, f.width,
		                     f.height, (double)f.scale_x,
		                     (double)f.scale_y, (double)f.pad_x,
		                     (double)f.pad_y);
		if (item == NULL || PyList_Append(list, item)) {
			Py_XDECREF(item);
			Py_DECREF(list);
			return NULL;
		}
		Py_DECREF(item);
	}
	return list;
}

/* Stream.tensor(result): a StreamTensor over the frames' tensor of a
 * stream reply with at least one frame, its tensor inline (numpy.asarray
 * of it views the reply: shape (N, C, H, W) or (N, H, W, C)). */
static PyObject *Stream_tensor(PyObject *op, PyObject *arg)
{
	StreamTensorObject *t;
	const fprep_result *res;
	fprep_stream_frame f;

	(void)op;
	if (Py_TYPE(arg) != (PyTypeObject *)Result_type) {
		PyErr_SetString(PyExc_TypeError, "tensor(result): a Result");
		return NULL;
	}
	res = &((ResultObject *)arg)->res;
	if (res->header.shape[0] == 0 ||
	    res->header.output_loc != FPREP_LOC_INLINE ||
	    fprep_stream_recv(res, 0, &f, NULL) != 0 || res->header.ndim != 4)
		return native_raise(FPREP_EPROTO,
		                    "not a stream reply with frames");
	t = PyObject_New(StreamTensorObject, (PyTypeObject *)StreamTensor_type);
	if (t == NULL)
		return NULL;
	Py_INCREF(arg);
	t->result = arg;
	return (PyObject *)t;
}

static void Stream_dealloc(PyObject *op)
{
	StreamObject *self = (StreamObject *)op;
	PyTypeObject *tp = Py_TYPE(op);
	freefunc free_fn = (freefunc)PyType_GetSlot(tp, Py_tp_free);

	if (self->client != NULL)
		(void)stream_close(self);
	Py_XDECREF(self->client);
	free_fn(op);
	Py_DECREF(tp);
}

static PyObject *Stream_id(PyObject *op, void *unused)
{
	StreamObject *self = (StreamObject *)op;

	(void)unused;
	return PyLong_FromUnsignedLong(
	        self->st != NULL ? fprep_stream_id(self->st) : 0);
}

static PyMethodDef Stream_methods[] = {
        {"send", Stream_send, METH_VARARGS,
         "send(packet, pts, out_loc=0, out_region=0, out_offset=0, "
         "out_capacity=0): one access unit; the reply's Result."},
        {"flush", Stream_flush, METH_VARARGS,
         "flush(out_loc=0, out_region=0, out_offset=0, out_capacity=0): "
         "the frames held; the reply's Result."},
        {"close", Stream_close, METH_NOARGS, "close(): ends the stream."},
        {"frames", Stream_frames, METH_O,
         "frames(result): the frame records of a stream reply."},
        {"tensor", Stream_tensor, METH_O,
         "tensor(result): the frames' tensor of a stream reply."},
        {NULL, NULL, 0, NULL}};

static PyGetSetDef Stream_getset[] = {
        {"id", Stream_id, NULL, "The stream's id on the daemon (0: closed).",
         NULL},
        {NULL, NULL, NULL, NULL, NULL}};

static PyType_Slot Stream_slots[] = {
        {Py_tp_new, Stream_new},
        {Py_tp_dealloc, Stream_dealloc},
        {Py_tp_methods, Stream_methods},
        {Py_tp_getset, Stream_getset},
        {Py_tp_doc, "Stream(client, request, codec, params=None): "
                    "fprep_stream."},
        {0, NULL}};

PyType_Spec Stream_spec = {"frameprep._native.Stream", sizeof(StreamObject), 0,
                           Py_TPFLAGS_DEFAULT, Stream_slots};

/* StreamTensor.__array_interface__: the tensor of the reply's frames. */
static PyObject *StreamTensor_array(PyObject *op, void *unused)
{
	const fprep_result *res =
	        &((ResultObject *)((StreamTensorObject *)op)->result)->res;
	const fprep_reply_header *h = &res->header;
	const char *ts = h->dtype == FPREP_DTYPE_F32   ? "<f4"
	                 : h->dtype == FPREP_DTYPE_F16 ? "<f2"
	                                               : "|u1";

	(void)unused;
	return Py_BuildValue("{s:(KO),s:(IIII),s:s,s:i}", "data",
	                     (unsigned long long)(uintptr_t)res->payload,
	                     Py_False, "shape", h->shape[0], h->shape[1],
	                     h->shape[2], h->shape[3], "typestr", ts, "version",
	                     3);
}

static void StreamTensor_dealloc(PyObject *op)
{
	PyTypeObject *tp = Py_TYPE(op);
	freefunc free_fn = (freefunc)PyType_GetSlot(tp, Py_tp_free);

	Py_XDECREF(((StreamTensorObject *)op)->result);
	free_fn(op);
	Py_DECREF(tp);
}

static PyGetSetDef StreamTensor_getset[] = {
        {"__array_interface__", StreamTensor_array, NULL,
         "The frames' tensor, in the reply's memory.", NULL},
        {NULL, NULL, NULL, NULL, NULL}};

static PyType_Slot StreamTensor_slots[] = {
        {Py_tp_dealloc, StreamTensor_dealloc},
        {Py_tp_getset, StreamTensor_getset},
        {Py_tp_doc, "The tensor of a stream reply's frames."},
        {0, NULL}};

PyType_Spec StreamTensor_spec = {"frameprep._native.StreamTensor",
                                 sizeof(StreamTensorObject), 0,
                                 Py_TPFLAGS_DEFAULT, StreamTensor_slots};

/* Demux(path): opens the file's H.264 or HEVC video (fprep_demux_open);
 * raises UnsupportedError (FFmpeg's libraries missing), ServerIOError
 * (cannot read) or InvalidRequestError (no such video). */
static PyObject *Demux_new(PyTypeObject *tp, PyObject *args, PyObject *kw)
{
	static char *names[] = {"path", NULL};
	PyObject *path;
	DemuxObject *self;
	fprep_demux *d = NULL;
	fprep_demux_info info;
	int err;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O&", names,
	                                 PyUnicode_FSConverter, &path))
		return NULL;
	Py_BEGIN_ALLOW_THREADS err =
	        fprep_demux_open(PyBytes_AsString(path), &d, &info);
	Py_END_ALLOW_THREADS Py_DECREF(path);
	if (err)
		return native_raise(err, fprep_demux_last_error(NULL));
	self = (DemuxObject *)((allocfunc)PyType_GetSlot(tp, Py_tp_alloc))(tp,
	                                                                   0);
	if (self == NULL) {
		fprep_demux_close(d);
		return NULL;
	}
	self->d = d;
	self->info = info;
	return (PyObject *)self;
}

/* Demux.read(): the next access unit as (bytes, pts), or None at the end
 * of the file. */
static PyObject *Demux_read(PyObject *op, PyObject *unused)
{
	DemuxObject *self = (DemuxObject *)op;
	const uint8_t *data;
	size_t size;
	int64_t pts;
	int rv;

	(void)unused;
	if (self->d == NULL)
		return native_raise(FPREP_ECLOSED, "the demuxer was closed");
	Py_BEGIN_ALLOW_THREADS rv =
	        fprep_demux_read(self->d, &data, &size, &pts);
	Py_END_ALLOW_THREADS if (rv == 1) Py_RETURN_NONE;
	if (rv != 0)
		return native_raise(rv, fprep_demux_last_error(self->d));
	return Py_BuildValue("(y#L)", (const char *)data, (Py_ssize_t)size,
	                     (long long)pts);
}

/* Demux.close(): closes the file; a second close does nothing. */
static PyObject *Demux_close(PyObject *op, PyObject *unused)
{
	DemuxObject *self = (DemuxObject *)op;

	(void)unused;
	fprep_demux_close(self->d);
	self->d = NULL;
	Py_RETURN_NONE;
}

static void Demux_dealloc(PyObject *op)
{
	PyTypeObject *tp = Py_TYPE(op);
	freefunc free_fn = (freefunc)PyType_GetSlot(tp, Py_tp_free);

	fprep_demux_close(((DemuxObject *)op)->d);
	free_fn(op);
	Py_DECREF(tp);
}

/* Demux.info: (codec, width, height, frames, fps_num, fps_den,
 * time_base_num, time_base_den) of fprep_demux_info. */
static PyObject *Demux_info(PyObject *op, void *unused)
{
	const fprep_demux_info *i = &((DemuxObject *)op)->info;

	(void)unused;
	return Py_BuildValue("(IIILiiii)", (unsigned)i->codec, i->width,
	                     i->height, (long long)i->frames, i->fps_num,
	                     i->fps_den, i->time_base_num, i->time_base_den);
}

static PyMethodDef Demux_methods[] = {
        {"read", Demux_read, METH_NOARGS,
         "read(): the next access unit (bytes, pts), or None."},
        {"close", Demux_close, METH_NOARGS, "close(): closes the file."},
        {NULL, NULL, 0, NULL}};

static PyGetSetDef Demux_getset[] = {
        {"info", Demux_info, NULL, "What the container says (a tuple).", NULL},
        {NULL, NULL, NULL, NULL, NULL}};

static PyType_Slot Demux_slots[] = {{Py_tp_new, Demux_new},
                                    {Py_tp_dealloc, Demux_dealloc},
                                    {Py_tp_methods, Demux_methods},
                                    {Py_tp_getset, Demux_getset},
                                    {Py_tp_doc, "Demux(path): fprep_demux."},
                                    {0, NULL}};

PyType_Spec Demux_spec = {"frameprep._native.Demux", sizeof(DemuxObject), 0,
                          Py_TPFLAGS_DEFAULT, Demux_slots};
