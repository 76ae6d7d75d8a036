/*
 * _native_rules.c: the request rules of libframeprep that the package asks
 * instead of deciding them again: the tensor's shape and bytes
 * (fprep_tensor_shape) and the reading of the daemon's limits from its
 * INFO text (fprep_limits_parse). The daemon and the C client call the
 * same functions, so all three agree by construction. Module functions
 * only, added to frameprep._native by its init (native_rules_add).
 */
#include "_native.h"

/* rules_tensor_shape: tensor_shape(out_width, out_height, channel_order,
 * dtype, layout) -> ((N, C, H, W) or (N, H, W, C), bytes) of one frame's
 * tensor, as fprep_tensor_shape gives them, or None for values it refuses
 * (the caller raises its own error). */
static PyObject *rules_tensor_shape(PyObject *self, PyObject *args)
{
	unsigned long w, h;
	unsigned int order, dtype, layout;
	fprep_request req;
	uint32_t shape[4];
	uint64_t bytes;

	(void)self;
	if (!PyArg_ParseTuple(args, "kkIII:tensor_shape", &w, &h, &order,
	                      &dtype, &layout))
		return NULL;
	if (w > UINT32_MAX || h > UINT32_MAX || order > UINT8_MAX ||
	    dtype > UINT8_MAX || layout > UINT8_MAX)
		Py_RETURN_NONE;
	memset(&req, 0, sizeof(req));
	req.out_width = (uint32_t)w;
	req.out_height = (uint32_t)h;
	req.channel_order = (uint8_t)order;
	req.dtype = (uint8_t)dtype;
	req.layout = (uint8_t)layout;
	if (fprep_tensor_shape(&req, shape, &bytes) != FPREP_OK)
		Py_RETURN_NONE;
	return Py_BuildValue("(kkkk)K", (unsigned long)shape[0],
	                     (unsigned long)shape[1], (unsigned long)shape[2],
	                     (unsigned long)shape[3],
	                     (unsigned long long)bytes);
}

/* The fields of fprep_limits, by name, as INFO names them. */
#define RULES_LIMITS(X)                                                        \
	X(max_width)                                                           \
	X(max_height)                                                          \
	X(max_frame_bytes)                                                     \
	X(max_out_width)                                                       \
	X(max_out_height)                                                      \
	X(max_tensor_bytes)                                                    \
	X(max_elements)                                                        \
	X(max_batch_bytes)                                                     \
	X(max_jpeg_scans)                                                      \
	X(max_jpeg_scan_pixels)                                                \
	X(max_packet_bytes)                                                    \
	X(max_streams_per_conn)                                                \
	X(max_streams_per_uid)                                                 \
	X(max_stream_frames)                                                   \
	X(max_video_sessions)

/* rules_limits_parse: limits_parse(text) -> {name: int} of every
 * fprep_limits field, as fprep_limits_parse reads INFO's text (a field
 * the daemon does not tell has the value that function gives it); every
 * value None when the text lacks one of the six first limits or holds a
 * value out of its range (FPREP_EPROTO). */
static PyObject *rules_limits_parse(PyObject *self, PyObject *arg)
{
	const char *text;
	fprep_limits lim;
	PyObject *d, *v;
	int ok;

	(void)self;
	text = PyUnicode_AsUTF8AndSize(arg, NULL);
	if (text == NULL)
		return NULL;
	ok = fprep_limits_parse(text, &lim) == FPREP_OK;
	d = PyDict_New();
	if (d == NULL)
		return NULL;
#define RULES_PUT(name)                                                        \
	v = ok ? PyLong_FromUnsignedLongLong(lim.name) : Py_NewRef(Py_None);   \
	if (v == NULL || PyDict_SetItemString(d, #name, v) != 0) {             \
		Py_XDECREF(v);                                                 \
		Py_DECREF(d);                                                  \
		return NULL;                                                   \
	}                                                                      \
	Py_DECREF(v);
	RULES_LIMITS(RULES_PUT)
#undef RULES_PUT
	return d;
}

static PyMethodDef rules_functions[] = {
        {"tensor_shape", rules_tensor_shape, METH_VARARGS,
         "tensor_shape(out_width, out_height, channel_order, dtype, layout)"
         " -> (shape, bytes) of one frame's tensor, or None: "
         "fprep_tensor_shape."},
        {"limits_parse", rules_limits_parse, METH_O,
         "limits_parse(info_text) -> {limit: int, or None when the text "
         "lacks the limits}: fprep_limits_parse."},
        {NULL, NULL, 0, NULL}};

int native_rules_add(PyObject *m)
{
	return PyModule_AddFunctions(m, rules_functions);
}
