/*
 * libframeprep: the client library of frameprep, a GPU preprocessing
 * service for inference.
 *
 * A client connects to frameprepd over nng (ipc:// or tcp://), sends raw
 * frames and gets back model-ready tensors (letterboxed, colour-converted,
 * normalised, NCHW or NHWC, float32/float16/uint8). The wire format is in
 * <frameprep/protocol.h>. The library also carries the CPU reference
 * implementation of the preprocessing, which the daemon's CPU backend runs
 * and against which the GPU backend and clients check results.
 *
 * Conventions: functions return 0 (FPREP_OK) or a positive enum fprep_err;
 * objects are created with *_open / *_alloc and released with the matching
 * *_close / *_free; nothing is global.
 *
 * Threads: a client may be shared by threads. The calls that make
 * requests (fprep_client_request, fprep_client_elements,
 * fprep_client_info, fprep_client_limits, fprep_client_check_request,
 * fprep_client_register, fprep_client_submit,
 * fprep_pending_*, fprep_region_open, fprep_region_open_cuda,
 * fprep_region_close, fprep_ring_open, fprep_ring_submit) may run on
 * several threads at once on one client: each blocking call takes a call
 * slot of its own (an nng context and its aios; up to
 * FPREP_CLIENT_MAX_CALLS at once, more wait for one), and a reply in
 * shared memory is awaited where its own request put it. The settings
 * (fprep_client_set_spin, fprep_client_set_staging) are called between
 * requests: not while another thread is inside a call on the same client
 * (fprep_client_doorbell may be called at any time). fprep_client_close
 * is called once, after every other call on the client returned.
 * fprep_client_last_error tells the calling thread's last failure. One
 * object other than a client (a region, a ring's slot, a pending
 * request, a result) is used by one thread at a time; fprep_result_fini
 * may be called from any thread.
 */
#ifndef FRAMEPREP_FRAMEPREP_H
#define FRAMEPREP_FRAMEPREP_H

#include <stddef.h>
#include <stdint.h>

#include "frameprep/export.h"
#include "frameprep/protocol.h"

#ifdef __cplusplus
extern "C" {
#endif

/* FPREP_VERSION_STRING: the version of frameprep these headers are of. */
#define FPREP_VERSION_STRING "0.1.0"

/* fprep_err: every error frameprep reports, on the wire (reply status) and
 * from the API. Numbers are never reused. EBITSTREAM: a video packet (or a
 * stream's parameter sets) the decoder cannot decode; that stream waits for
 * its next IDR/IRAP picture, nothing else is affected (protocol.h, "Broken
 * bitstreams"). */
#define FPREP_ERRNO_MAP(XX)                                                    \
	XX(OK, 0, "success")                                                   \
	XX(EPROTO, 1, "malformed message")                                     \
	XX(EVERSION, 2, "unsupported protocol version")                        \
	XX(EINVAL, 3, "invalid field value")                                   \
	XX(ELIMIT, 4, "exceeds a configured limit")                            \
	XX(ENOMEM, 5, "out of memory")                                         \
	XX(EBUSY, 6, "server busy")                                            \
	XX(ESHUTDOWN, 7, "server shutting down")                               \
	XX(ECUDA, 8, "CUDA error")                                             \
	XX(ENVRTC, 9, "NVRTC error")                                           \
	XX(ETRANSPORT, 10, "transport error")                                  \
	XX(ETIMEDOUT, 11, "timed out")                                         \
	XX(EREGION, 12, "shared-memory region error")                          \
	XX(EPERM, 13, "permission denied")                                     \
	XX(EINTERNAL, 14, "internal error")                                    \
	XX(EIO, 15, "input/output error")                                      \
	XX(EUNSUPPORTED, 16, "not supported")                                  \
	XX(ECLOSED, 17, "closed")                                              \
	XX(EMISMATCH, 18, "reply does not match request")                      \
	XX(EFORKED, 19, "client of the parent used in a forked child")         \
	XX(EBITSTREAM, 20, "broken bitstream")

/* fprep_err: the numbers of FPREP_ERRNO_MAP, FPREP_OK = 0 first, each
 * FPREP_ plus the name (FPREP_EINVAL); never reused. */
enum fprep_err {
#define FPREP_ERR_ENUM(name, num, text) FPREP_##name = num,
	FPREP_ERRNO_MAP(FPREP_ERR_ENUM)
#undef FPREP_ERR_ENUM
};

/* fprep_strerror returns a static English description of err ("unknown
 * error" for numbers not in enum fprep_err). */
FPREP_EXTERN const char *fprep_strerror(int err);

/* fprep_err_name returns the enum name of err without the prefix, e.g.
 * "ELIMIT", or "UNKNOWN". */
FPREP_EXTERN const char *fprep_err_name(int err);

/* fprep_transform: where the source lands in the tensor. resized_w and
 * resized_h are the size of the resized image inside the tensor; pad_x and
 * pad_y the left and top padding in tensor pixels; scale_x and scale_y the
 * factors from source pixels to tensor pixels (resized / source size). */
typedef struct fprep_transform {
	uint32_t resized_w; /* the resized image's width in the tensor */
	uint32_t resized_h; /* the resized image's height in the tensor */
	uint32_t pad_x;     /* tensor pixels of padding on the left */
	uint32_t pad_y;     /* tensor pixels of padding on the top */
	float scale_x;      /* source pixels -> tensor pixels, x */
	float scale_y;      /* source pixels -> tensor pixels, y */
} fprep_transform;

/* fprep_fit_compute computes the letterbox (or stretch) fit of a source of
 * src_w x src_h pixels (> 0; fractional for a ROI box) into an out_width x
 * out_height tensor, the one arithmetic behind every transform the daemon
 * reports (frames, ROI boxes, batch frames): LETTERBOX follows the
 * Ultralytics LetterBox convention: r = min(out_width/src_w,
 * out_height/src_h) in double precision, resized = (round_half_even(src_w *
 * r), round_half_even(src_h * r)) clamped to [1, out], dw = (out_width -
 * resized_w) / 2, pad_x = round_half_even(dw - 0.1), likewise pad_y;
 * resize FPREP_RESIZE_STRETCH has resized = out and no padding. scale_x =
 * resized_w / src_w, scale_y likewise (source pixels -> tensor pixels). A
 * source side that is not > 0 gives an all-zero *xf. Pure: any thread. A
 * client computes with it where a tensor pixel maps in the source before or
 * without asking the daemon. */
FPREP_EXTERN void fprep_fit_compute(uint32_t out_width, uint32_t out_height,
                                    double src_w, double src_h, int resize,
                                    fprep_transform *xf);

/* fprep_transform_compute computes the transform of a valid FRAME request
 * (both backends use it, so they agree exactly): fprep_fit_compute of the
 * request's source and tensor sizes and its resize mode. */
FPREP_EXTERN void fprep_transform_compute(const fprep_request *req,
                                          fprep_transform *xf);

/* fprep_preprocess_cpu runs a FRAME request on the CPU, on the calling
 * thread. This is the reference implementation of the preprocessing.
 *
 * req    a request that fprep_request_decode accepted.
 * frame  the source pixels: src_height rows of src_stride bytes (the last
 *        row needs only src_width * bpp bytes).
 * tensor output of tensor_size bytes, exactly as fprep_tensor_shape gives;
 *        every byte is written.
 * xf     if not NULL, receives the transform.
 *
 * Resize semantics match OpenCV cv2.resize(INTER_LINEAR): source coordinate
 * = (dst + 0.5) * src_size / resized_size - 0.5, clamped to the image; the
 * padding matches cv2.copyMakeBorder(BORDER_CONSTANT, pad_value). Results are
 * within 1 LSB (before normalisation) of OpenCV's fixed-point arithmetic;
 * with req->rounding FPREP_ROUNDING_OPENCV (exact mode, protocol.h) they
 * are OpenCV's uint8 pixels, normalised, bit for bit.
 * Returns 0 or FPREP_EINVAL (tensor_size wrong, request invalid). */
FPREP_EXTERN int fprep_preprocess_cpu(const fprep_request *req,
                                      const void *frame, void *tensor,
                                      size_t tensor_size, fprep_transform *xf);

/* fprep_preprocess_elements_cpu runs a ROIS or BATCH request on the CPU,
 * on the calling thread: the reference of protocol.h's "ROIS and BATCH
 * requests".
 *
 * req      a request of kind FPREP_KIND_ROIS or FPREP_KIND_BATCH with
 *          req->elements = N set (input_span too for BATCH), valid as
 *          fprep_request_decode would find it (limits aside).
 * elements N elements: BOX or AFFINE for ROIS, FRAME for BATCH.
 * input    ROIS: the frame, as for fprep_preprocess_cpu; BATCH: the
 *          frames, frame k at elements[k].offset bytes from input.
 * tensor   tensor_size bytes (fprep_tensor_shape: N x one element's
 *          tensor), every byte written: element k at k x tensor_size / N.
 * xfs      if not NULL, N transforms (fprep_element_transform).
 *
 * Returns 0 or FPREP_EINVAL (an invalid request or element, a wrong
 * tensor_size; elements are checked as the daemon checks them). */
FPREP_EXTERN int fprep_preprocess_elements_cpu(const fprep_request *req,
                                               const fprep_element *elements,
                                               const void *input, void *tensor,
                                               size_t tensor_size,
                                               fprep_element_xf *xfs);

/* FPREP_SOCKET_ENV: the environment variable that names the daemon's URL
 * (or a comma-separated list, as fprep_client_open takes) for every client
 * that is given none: fprep_default_url returns it when it is set and not
 * empty. */
#define FPREP_SOCKET_ENV "FRAMEPREP_SOCKET"

/* FPREP_TRUST_SOCKET_OWNER_ENV: the environment variable that names one
 * more user (a name or a numeric uid) whose ipc:// socket a client dials;
 * see fprep_client_open_trusting. */
#define FPREP_TRUST_SOCKET_OWNER_ENV "FRAMEPREP_TRUST_SOCKET_OWNER"

/* fprep_default_url writes the URL a client dials when given none into buf:
 * $FRAMEPREP_SOCKET when set and not empty, else the daemon's default
 * listen URL, "ipc://$XDG_RUNTIME_DIR/frameprep.sock" when XDG_RUNTIME_DIR
 * is set, else "ipc:///tmp/frameprep-$UID.sock". Returns 0, or
 * FPREP_ELIMIT if buf is too small. */
FPREP_EXTERN int fprep_default_url(char *buf, size_t size);

/* fprep_client: a connection to frameprepd. */
typedef struct fprep_client fprep_client;

/* FPREP_CLIENT_MAX_CALLS: the blocking calls one client has in flight at
 * once (each on an nng context of its own, made on demand and reused); a
 * call that finds all of them busy waits for one, within its timeout
 * (then FPREP_ETIMEDOUT). Asynchronous requests (fprep_client_submit) are
 * not counted. */
#define FPREP_CLIENT_MAX_CALLS 16

/* fprep_client_open dials url (NULL: fprep_default_url, so
 * $FRAMEPREP_SOCKET first) and stores a new client in *clientp. url must
 * be ipc://PATH or tcp://HOST:PORT, else FPREP_EINVAL. Before an ipc://
 * socket is dialled its file must exist (FPREP_ETRANSPORT naming a missing
 * directory or socket) and be owned by the caller, root or the service's
 * user "frameprep" (if that user exists here), whoever gave the URL: else
 * FPREP_EPERM, naming the path and its owner, and nothing is sent, since
 * another local user could have created the path first (in /tmp, say) and
 * would receive the frames and be granted the client's shared memory. A
 * connection whose peer (the listening process, SO_PEERCRED) runs as
 * another user is dropped likewise before anything is sent on it. To dial
 * a daemon of one more user on purpose, name that user: see
 * fprep_client_open_trusting. The dial is synchronous: it fails with
 * FPREP_ETRANSPORT when nobody listens.
 *
 * url may list several daemons, comma-separated ("ipc:///a.sock,tcp://h:5555",
 * at most 16): one socket dials them all, and nng spreads the requests over
 * the connections and resends a request to another daemon when its
 * connection closes (the daemon died) or no reply came within half of
 * timeout_ms (at least 1 s). A request is then answered once but may be
 * processed twice (at least once). The open succeeds when one daemon
 * answers; the others are dialled again in the background. Shared memory
 * (fprep_region_open, fprep_ring_open) is refused with FPREP_EUNSUPPORTED
 * on such a client, and its limits (fprep_client_limits) are those of the
 * daemon that answered the INFO.
 * fprep_client_last_error(NULL) says why in each case. timeout_ms bounds
 * the dial (a daemon that takes the connection and does not answer, one
 * stopped with SIGSTOP say, fails it with FPREP_ETIMEDOUT, "timed out
 * after N ms") and each call afterwards, send and reply together (0:
 * 30 s); the client's nng contexts get it as their send and receive
 * timeouts. A lost connection (the daemon restarted) is redialled in the
 * background, 20 ms after the loss and then at most every 200 ms, and
 * later calls go to the new daemon: the client's stages are made again,
 * but regions and rings the program opened were the old daemon's
 * (requests naming them get FPREP_EREGION) and are opened again by the
 * program. Release with
 * fprep_client_close. Any thread.
 *
 * fork: a child made by fork (a DataLoader worker, a pre-forked server)
 * opens clients of its own and uses them as any process does, whether or
 * not its parent used frameprep (with the bundled nng: FPREP_NNG=system
 * builds get nng's own fork check, a panic, instead). The parent's clients,
 * regions, rings and pending requests stay the parent's: in the child every
 * call on them fails with FPREP_EFORKED ("a child process must open a
 * client of its own") without touching their connection or shared memory,
 * and fprep_client_close, fprep_region_close or fprep_ring_close there
 * frees only the child's copy of what it can free without the parent's
 * locks (a closed client: nothing), so the parent keeps working. */
FPREP_EXTERN int fprep_client_open(fprep_client **clientp, const char *url,
                                   int timeout_ms);

/* fprep_client_open_trusting is fprep_client_open that also trusts the
 * user trust_owner (a user name or a numeric uid) as the owner of an
 * ipc:// socket and as its peer, and so grants that user access to the
 * client's shared-memory regions when its daemon runs as that user.
 * trust_owner NULL or "": the user named by $FRAMEPREP_TRUST_SOCKET_OWNER,
 * if set, else none (fprep_client_open does exactly this). Returns
 * fprep_client_open's errors, or FPREP_EINVAL when trust_owner names no
 * user. */
FPREP_EXTERN int fprep_client_open_trusting(fprep_client **clientp,
                                            const char *url, int timeout_ms,
                                            const char *trust_owner);

/* fprep_client_close closes the connection and frees the client. Results
 * obtained from it stay valid. Requests still pending fail (their wait
 * returns FPREP_ETRANSPORT) and must still be given to fprep_pending_wait;
 * the client's memory goes with the last of them. NULL is ignored. Once,
 * after every other call on the client returned (no blocking call may be
 * in progress on another thread). */
FPREP_EXTERN void fprep_client_close(fprep_client *client);

/* fprep_client_set_spin sets how long fprep_client_request polls for a
 * reply that comes in shared memory (fprep_request.shm_reply) before it
 * sleeps in futex(2), in microseconds per request: 0 (the default) sleeps
 * at once; N keeps the calling thread busy for up to N us, which takes the
 * sleeping thread's wake-up out of the latency (and its jitter out of
 * p99) at the cost of a busy core while it waits, as frameprepd's
 * --spin-us does on the daemon's side. Other requests are not affected.
 * Call it between requests (it is read by calls in progress on other
 * threads, without harm, but meant as a setting). */
FPREP_EXTERN void fprep_client_set_spin(fprep_client *client, unsigned spin_us);

/* fprep_client_doorbell sets up (on != 0) or ends (on == 0) this client's
 * doorbell (protocol.h, "Doorbells"): a page of shared memory registered
 * with the daemon, which its loop polls while it spins (--spin-us).
 * While the client has one, fprep_client_request sends the requests it
 * serves (below: FRAME or ECHO requests whose frame and tensor are both
 * in regions, a staged inline frame's included) through the doorbell
 * whenever the daemon polls it or sleeps on its wake word (then rung,
 * with FUTEX_WAKE), and through nng otherwise (a kernel without
 * futex_waitv(2), and the daemon asleep);
 * either way the reply is the same, but by the doorbell the request
 * crosses no nng thread, which takes their wake-ups out of its latency.
 * The wait for the reply polls for up to the client's spin_us
 * (fprep_client_set_spin), then sleeps in futex(2). ipc:// only, like
 * every region.
 *
 * By default (neither called) the first staged call (fprep_client_request
 * with an inline frame on an ipc:// client) sets the doorbell up, once per
 * connection, and it serves the staged calls only (a request whose frame
 * is in the program's own regions goes through nng as before); a daemon
 * that refuses (--max-doorbells 0, at its limits) leaves the calls on nng
 * until the client's next connection, and no call fails for it; a
 * fprep_region_open at the daemon's --max-regions ends it, as it closes
 * the free stages. With on != 0 the client sets it up now, for every
 * request that fits it, and again on the first such request after a
 * daemon restart; with on == 0 it ends any doorbell and sets none up from
 * then on (call it before the first request to keep the client off
 * doorbells: the daemon then polls one area less, and --max-doorbells
 * counts one fewer). Returns 0 (also when there was nothing to do), or
 * the error of the REGISTER or DOORBELL request (FPREP_EPERM: the daemon
 * runs with --max-doorbells 0).
 * After a daemon restart the doorbell of the old daemon is dropped
 * without an UNREGISTER, as the client's regions are. A doorbell request
 * that the daemon took and never answered within the client's timeout
 * fails with FPREP_ETIMEDOUT and leaves the doorbell unused on that
 * connection. fprep_client_close ends it. One blocking call at a time
 * uses the doorbell's one entry; calls made meanwhile on other threads go
 * through nng. Any thread, also while calls are in progress on others:
 * ending the doorbell waits for the call that uses it, if any, to end. */
FPREP_EXTERN int fprep_client_doorbell(fprep_client *client, int on);

/* fprep_client_last_error returns a sentence about the calling thread's
 * last failure on this client (the transport error name, or the server's
 * message), or "" (also when this thread made no call on it): each thread
 * reads its own, so calls on other threads do not overwrite it. The text
 * lives until this thread's next call on any client. With client NULL it
 * returns the calling thread's last fprep_client_open failure (nng's error
 * text for a failed dial). */
FPREP_EXTERN const char *fprep_client_last_error(const fprep_client *client);

/* fprep_client_conn_lost returns how many connections client has lost so
 * far (the daemon died or restarted): a region registered while it said n
 * is unknown to the daemon once it says more, and is opened anew. Any
 * thread. */
FPREP_EXTERN uint64_t fprep_client_conn_lost(fprep_client *client);

/* fprep_result: a reply received by the client. header is the decoded reply
 * header; payload points to payload_size bytes (the tensor for FRAME/ECHO,
 * the text for INFO), owned by the result: in the reply's message, or in
 * the client's stage (fprep_client_request), which the result holds. A
 * result stays valid after its client is closed. Release it with
 * fprep_result_fini, from any thread. */
typedef struct fprep_result {
	fprep_reply_header header; /* the decoded reply header */
	const void *payload;       /* the tensor or text, or NULL */
	size_t payload_size;       /* bytes at payload */
	void *priv;                /* internal: what owns the payload */
} fprep_result;

/* fprep_result_fini releases what a result owns and zeroes it. */
FPREP_EXTERN void fprep_result_fini(fprep_result *res);

/* fprep_limits_parse reads the daemon's limits from the text of its INFO
 * reply (text NUL-terminated, "key: value" lines: max_width, max_height,
 * max_frame_bytes, max_out_width, max_out_height, max_tensor_bytes, and
 * when the daemon tells them max_elements, max_batch_bytes,
 * max_jpeg_scans, max_jpeg_scan_pixels, else 0) into *lim. Returns 0, or
 * FPREP_EPROTO (*lim zeroed) when one of the first six is missing or not a
 * number in its field's range. The one reading of INFO's limits: the
 * client's fprep_client_limits uses it, and so can any other client. Pure:
 * any thread. */
FPREP_EXTERN int fprep_limits_parse(const char *text, fprep_limits *lim);

/* fprep_doorbell_check tells whether req may come through a doorbell entry
 * (protocol.h, "Doorbells"): a FRAME or ECHO whose frame and tensor are
 * both in regions (the reply in the entry carries no payload). Returns 0,
 * or FPREP_EINVAL with the reason written into why (why_size bytes,
 * NUL-terminated; why may be NULL). The daemon refuses a request posted in
 * an entry with this reason; a client asks it before it posts one. Pure:
 * any thread. */
FPREP_EXTERN int fprep_doorbell_check(const fprep_request *req, char *why,
                                      size_t why_size);

/* fprep_client_limits stores in *lim the limits the daemon enforces on
 * requests, from its INFO reply: asked the first time (one round trip)
 * and kept for the life of the client, also when the daemon could not
 * tell them. Returns 0, fprep_client_info's errors, the server's status,
 * or FPREP_EPROTO when the daemon did not tell its limits. Any thread
 * (the first callers wait for the one INFO). */
FPREP_EXTERN int fprep_client_limits(fprep_client *client, fprep_limits *lim);

/* fprep_client_check_request checks req against the limits the daemon's
 * transport enforces without a reply: an inline frame (FRAME or ECHO)
 * larger than max_frame_bytes would only have its connection dropped.
 * Returns 0, or FPREP_ELIMIT with a sentence naming the size and the limit
 * in fprep_client_last_error. The limits come from fprep_client_limits; a
 * daemon that cannot tell them is not checked. fprep_client_request and
 * fprep_client_submit call it for every inline frame. */
FPREP_EXTERN int fprep_client_check_request(fprep_client *client,
                                            const fprep_request *req);

/* fprep_client_request sends one request and waits for its reply.
 *
 * req      a request (see fprep_request_init); its request_id is assigned
 *          by the client (unique per client) and written back.
 * payload  for inline input, req->input_size bytes of frame; else NULL.
 * res      receives the reply, also when the server answered with an error.
 *
 * Returns FPREP_OK when a reply with a matching request id arrived (check
 * res->header.status for the server's verdict), or FPREP_ETRANSPORT,
 * FPREP_ETIMEDOUT, FPREP_EPROTO (unreadable reply), FPREP_EMISMATCH (reply
 * for another request), FPREP_ENOMEM, or FPREP_ELIMIT (an inline frame
 * over the daemon's max_frame_bytes, not sent: see
 * fprep_client_check_request). On error *res is left zeroed.
 *
 * On an ipc:// client of one daemon, an inline FRAME or ECHO (input
 * inline, output inline or in a CUDA region, no shm_reply) is staged
 * through shared memory: the frame
 * is copied into a region of the client's own (a stage, opened and
 * registered the first time, reopened larger for a larger frame), the
 * daemon reads it there and writes the tensor and the reply header back
 * into it, and res->payload views the tensor in the stage. No payload
 * crosses the socket, so the simple call costs about what the ring path
 * does. The result holds its stage until fprep_result_fini; while a
 * client's four stages are all held by results, or when the daemon
 * refuses to register one (a --max-shm-bytes limit, a daemon that allows
 * no shared memory), the frame goes inline through the socket, as it
 * always does over tcp://. Either way req and *res read as for an inline
 * reply (res->header.output_loc INLINE, payload_size the tensor's bytes).
 * With the output in a CUDA region only the frame is staged: the daemon
 * writes the tensor there as for any CUDA output, the stage is free again
 * when the call returns, and *res reads as the CUDA reply it is.
 * The staged request goes through the client's doorbell, which the first
 * staged call sets up, whenever the doorbell's one entry is free (see
 * fprep_client_doorbell, which turns that off), and through nng
 * otherwise. fprep_client_set_staging turns staging off.
 *
 * Any thread, several at once on one client: each call has its own nng
 * context (FPREP_CLIENT_MAX_CALLS at once; more wait, within the
 * timeout) and its own stage, and a reply in shared memory (shm_reply) is
 * awaited at the place its own request names, so calls on several
 * threads must name different reply places. The timeout bounds the whole
 * call (a free slot, the send and the reply); FPREP_ETIMEDOUT's sentence
 * says "timed out after N ms". */
FPREP_EXTERN int fprep_client_request(fprep_client *client, fprep_request *req,
                                      const void *payload, fprep_result *res);

/* fprep_region: a registered region (described with fprep_region_open,
 * below). */
typedef struct fprep_region fprep_region;

/* fprep_stream: a video stream open on a client (protocol.h, "Video
 * streams"), used by one thread at a time; closed with
 * fprep_stream_close before its client is. */
typedef struct fprep_stream fprep_stream;

/* fprep_stream_open opens a video stream on client and waits for the
 * daemon's answer.
 *
 * spec        a STREAM_OPEN request (fprep_stream_request_init: the codec,
 *             then the tensor's fields as for a FRAME), or a FRAME's
 *             request with src_format set to the codec: its kind and
 *             source fields (sizes, strides, plane offsets) are the
 *             stream's and are ignored; copied.
 * params      params_len bytes of Annex-B parameter sets (H.264 SPS and
 *             PPS; HEVC VPS, SPS and PPS), or NULL and 0 when they come in
 *             the packets; copied into the request.
 * sp          receives the stream (on success only).
 *
 * Returns 0; a transport error (FPREP_ETIMEDOUT, FPREP_ETRANSPORT...); or
 * the daemon's refusal (FPREP_ELIMIT naming max_streams_per_conn,
 * max_streams_per_uid, max_packet_bytes or the coded size;
 * FPREP_EUNSUPPORTED from a backend with no decoder; FPREP_EBITSTREAM,
 * "broken bitstream: ...", for parameter sets the decoder refuses), with
 * its sentence in
 * fprep_client_last_error. Any thread. */
FPREP_EXTERN int fprep_stream_open(fprep_client *client,
                                   const fprep_request *spec,
                                   const void *params, size_t params_len,
                                   fprep_stream **sp);

/* fprep_stream_send sends one packet (size bytes, an Annex-B access unit:
 * one picture's NAL units, parameter sets included where the stream has
 * them) with its pts, and waits for the reply: res receives the frames
 * the decoder let out after it, in display order (0, 1 or more;
 * fprep_stream_recv reads them). Returns 0 when a reply came, and then
 * res->header.status is the daemon's: FPREP_OK (a packet dropped while the
 * stream waits for an IDR/IRAP picture has FPREP_REPLY_F_STREAM_SKIPPED in
 * res->header.flags), FPREP_EBITSTREAM "broken bitstream: ..." (a broken
 * packet: the stream waits
 * for the next IDR/IRAP picture), FPREP_ELIMIT (naming the limit);
 * otherwise a transport error, or FPREP_EINVAL for size 0 or over
 * max_packet_bytes. Release res with fprep_result_fini. */
FPREP_EXTERN int fprep_stream_send(fprep_stream *st, const void *packet,
                                   size_t size, int64_t pts, fprep_result *res);

/* The asynchronous API's (below): fprep_pending, fprep_done_fn. */
typedef struct fprep_pending fprep_pending;
typedef void (*fprep_done_fn)(fprep_pending *p, void *arg);

/* fprep_stream_submit sends one packet like fprep_stream_send without
 * waiting for its reply, so that a stream keeps several packets in
 * flight (the daemon's GPU decoder then decodes the next packet while it
 * preprocesses the frames of the one before). Packets submitted on st are
 * sent, decoded and answered in the order of the calls, each reply with
 * exactly the frames its packet let out; give the handles to
 * fprep_pending_wait in that order (res as for fprep_stream_send) to read
 * the frames in display order. fprep_stream_flush and fprep_stream_close
 * wait their turn behind the packets in flight. cb (may be NULL) is
 * called with arg when the reply arrives (fprep_done_fn). On success
 * stores a handle in *pp, which must be given to fprep_pending_wait
 * exactly once, before the stream is closed. Returns 0, FPREP_EINVAL
 * (size 0), or a transport error (FPREP_ENOMEM, FPREP_ETRANSPORT) with
 * nothing sent. The stream's thread (fprep_stream). */
FPREP_EXTERN int fprep_stream_submit(fprep_stream *st, const void *packet,
                                     size_t size, int64_t pts, fprep_done_fn cb,
                                     void *arg, fprep_pending **pp);

/* fprep_stream_flush asks the decoder for every frame it still holds
 * (the end of a file, or before a jump) and waits: res as for
 * fprep_stream_send. The stream then takes packets again from an
 * IDR/IRAP picture. */
FPREP_EXTERN int fprep_stream_flush(fprep_stream *st, fprep_result *res);

/* fprep_stream_set_output says where the tensors of st's next PACKET and
 * FLUSH requests go, until it is called again (protocol.h, "Tensors in a
 * region"): capacity bytes at offset of region out, a region of st's
 * client (fprep_region_open for shared memory; fprep_region_open_cuda
 * for device memory on the GPU that decodes the stream), frame k's
 * tensor at offset + k x (tensor_size / N), so that the tensors of a
 * stream decoded on a GPU land in the program's CUDA memory without a
 * copy. out NULL: in the reply again (the default). The daemon refuses a
 * reply whose frames do not fit capacity (FPREP_ELIMIT, those frames
 * dropped): give room for a packet's frames (one or two; a flush: up to
 * max_stream_frames). With several requests in flight
 * (fprep_stream_submit), give each its own place, and read one only
 * after its reply came. Returns 0, or FPREP_EINVAL (capacity 0, or the
 * span outside out). The stream's thread. */
FPREP_EXTERN int fprep_stream_set_output(fprep_stream *st,
                                         const fprep_region *out,
                                         uint64_t offset, uint64_t capacity);

/* fprep_stream_set_output_id is fprep_stream_set_output for a region
 * known by its id alone: region, the region_id of a REGISTER or
 * REGISTER_CUDA reply (fprep_client_register) on st's client, of location
 * FPREP_LOC_SHM or FPREP_LOC_CUDA; FPREP_LOC_INLINE sends the tensors in
 * the reply again (region, offset and capacity ignored). The span is not
 * checked here (the library does not know the region's size); the daemon
 * checks it, as it checks a FRAME's (FPREP_EINVAL, FPREP_EREGION). For
 * bindings that keep their own cache of registered regions. Returns 0,
 * or FPREP_EINVAL (another location, capacity 0). The stream's thread. */
FPREP_EXTERN int fprep_stream_set_output_id(fprep_stream *st, int location,
                                            uint32_t region, uint64_t offset,
                                            uint64_t capacity);

/* fprep_stream_recv reads frame k (0 <= k < res->header.shape[0]) of a
 * stream reply res that succeeded: *frame its record (pts, decoded size,
 * transform) and *tensor (if not NULL) its tensor, inside res's payload
 * (res->header.tensor_size / shape[0] bytes, shape[1..3] of the header);
 * NULL when the tensors went to a region (res->header.output_loc SHM or
 * CUDA: frame k's is at the place fprep_stream_set_output gave, offset +
 * k x tensor_size / shape[0]).
 * Returns 0, or FPREP_EINVAL for another reply or k out of range. */
FPREP_EXTERN int fprep_stream_recv(const fprep_result *res, uint32_t k,
                                   fprep_stream_frame *frame,
                                   const void **tensor);

/* fprep_stream_close ends the stream on the daemon (frames it still held
 * are dropped: flush first to have them) and frees st, whatever the
 * answer. Returns 0, the daemon's status, or a transport error. */
FPREP_EXTERN int fprep_stream_close(fprep_stream *st);

/* fprep_stream_drop frees st without a request to the daemon: for a
 * stream whose client was closed (the daemon dropped the stream with the
 * connection), or that a child made by fork inherited. st may be NULL.
 * Touches nothing of st's client. Any thread. */
FPREP_EXTERN void fprep_stream_drop(fprep_stream *st);

/* fprep_stream_id returns the stream's id on the daemon. */
FPREP_EXTERN uint32_t fprep_stream_id(const fprep_stream *st);

/* fprep_client_elements sends one ROIS or BATCH request (protocol.h,
 * "ROIS and BATCH requests": N crops of one frame, or N frames of one
 * size, into one tensor) and waits for its reply, like
 * fprep_client_request.
 *
 * req      a request of kind FPREP_KIND_ROIS or FPREP_KIND_BATCH, its
 *          source fields those of one frame (fprep_request_init, then set
 *          kind, out size, dtype...); its request_id, elements (= n) and
 *          input_span are assigned. SHM_REPLY is refused (EINVAL).
 * elements n elements, 1..FPREP_ELEMENTS_MAX (and the daemon's
 *          max_elements): BOX or AFFINE for ROIS, FRAME for BATCH; each
 *          is checked as the daemon checks it, and a bad one refused with
 *          FPREP_EINVAL naming its index (fprep_client_last_error).
 * payload  inline input: ROIS: the frame (input_size bytes); BATCH:
 *          max_k(offset + input_size) bytes holding frame k at
 *          elements[k].offset; copied into the message, so the caller
 *          keeps it. Inline, table and frames must fit the daemon's
 *          max_frame_bytes (FPREP_ELIMIT; use a region). NULL for input
 *          in a region (in_region, in_offset: frame k at in_offset +
 *          elements[k].offset).
 * res      on success the reply: header.shape (N, C, H, W) or (N, H, W,
 *          C), header.tensor_size the whole tensor; payload the tensor
 *          (inline output), element k at k * tensor_size / N, followed by
 *          the N transform records (fprep_result_element_xf). A CUDA or
 *          SHM output holds the tensor at out_offset once the reply is
 *          there. Release with fprep_result_fini.
 *
 * Returns 0 (the daemon's status is res->header.status), FPREP_EINVAL,
 * FPREP_ELIMIT, or the transport errors of fprep_client_request. Any
 * thread, several at once. Not staged, not through a doorbell. */
FPREP_EXTERN int fprep_client_elements(fprep_client *client, fprep_request *req,
                                       const fprep_element *elements,
                                       uint32_t n, const void *payload,
                                       fprep_result *res);

/* fprep_result_element_xf reads element k's transform from the reply of a
 * ROIS or BATCH request that succeeded: tensor point (u, v) of element k
 * is source point (origin_x + (u - pad_x) / scale_x, origin_y + (v -
 * pad_y) / scale_y) (all zero for an AFFINE element). Returns 0, or
 * FPREP_EINVAL (not such a reply, k >= N). Any thread. */
FPREP_EXTERN int fprep_result_element_xf(const fprep_result *res, uint32_t k,
                                         fprep_element_xf *xf);

/* fprep_element_check checks element k of a ROIS or BATCH request req as
 * the daemon will (the wire's element records) and widens *span (bytes
 * from the frame's start, 0 at first) to cover a BATCH element's frame.
 * Returns 0, or FPREP_EINVAL with a sentence naming the element in msg
 * (msg_size bytes, NUL-terminated). Thread-safe. */
FPREP_EXTERN int fprep_element_check(const fprep_request *req, uint32_t k,
                                     const fprep_element *el, uint64_t *span,
                                     char *msg, size_t msg_size);

/* fprep_client_set_staging turns the staging of inline frames through
 * shared memory (see fprep_client_request) on (on != 0, the default) or
 * off, closing the stages no result holds. Call it between requests: not
 * while another thread is inside a call on this client. */
FPREP_EXTERN void fprep_client_set_staging(fprep_client *client, int on);

/* fprep_pending: one request in flight on a client (asynchronous API). */
typedef struct fprep_pending fprep_pending;

/* fprep_done_fn: called once when a pending request's reply (or its
 * failure) arrives, from one of nng's threads. It must not block and must
 * not call fprep_pending_wait; it typically wakes the submitting thread. */
typedef void (*fprep_done_fn)(fprep_pending *p, void *arg);

/* fprep_client_submit sends a request without waiting for the reply, so one
 * thread can keep several frames in flight on one connection (each rides
 * its own nng context; the daemon may answer them in any order). req and
 * payload are as for fprep_client_request; payload is copied into the
 * message before the call returns, so the caller may reuse it (shared-memory
 * input must stay untouched until the reply). An inline frame goes through
 * the socket (it is not staged: use a ring, fprep_ring_submit, for frames
 * in flight through shared memory). cb (may be NULL) is called
 * with arg when the reply arrives. On success stores a handle in *pp that
 * must be given to fprep_pending_wait exactly once. The first inline
 * frame on a client waits for one INFO round trip (fprep_client_limits);
 * call that first to keep it out of a timed loop. Returns 0, or
 * FPREP_ENOMEM, FPREP_ETRANSPORT, FPREP_ELIMIT (as fprep_client_request), or
 * FPREP_EINVAL for a request with shm_reply (its reply comes in shared
 * memory only, which fprep_client_request alone waits for). Any thread,
 * several at once. */
FPREP_EXTERN int fprep_client_submit(fprep_client *client, fprep_request *req,
                                     const void *payload, fprep_done_fn cb,
                                     void *arg, fprep_pending **pp);

/* fprep_pending_done returns nonzero once p's reply or failure has arrived
 * (fprep_pending_wait will not block). Any thread. */
FPREP_EXTERN int fprep_pending_done(const fprep_pending *p);

/* fprep_pending_wait waits for p (up to the client's timeout from the
 * submission), stores the reply in *res with the same rules and errors as
 * fprep_client_request, and frees p. Any one thread, once per p. */
FPREP_EXTERN int fprep_pending_wait(fprep_pending *p, fprep_result *res);

/* fprep_client_register sends a REGISTER, UNREGISTER or REGISTER_CUDA
 * request *req, assigning its version and request id, and stores the reply
 * in *res (free it with fprep_result_fini): the daemon's status is
 * res->header.status and, after a REGISTER or REGISTER_CUDA, the new
 * region's id res->header.region_id. Most programs use fprep_region_open,
 * fprep_region_open_cuda and fprep_region_close instead. Returns 0 or a
 * transport error, like fprep_client_request. Any thread, several at once
 * (as fprep_client_request). */
FPREP_EXTERN int fprep_client_register(fprep_client *client,
                                       fprep_register_request *req,
                                       fprep_result *res);

/* fprep_client_info asks the daemon what it runs. On success res->payload
 * holds payload_size bytes of "key: value" lines (NUL-terminated as a
 * convenience; the NUL is not counted). Any thread, several at once. */
FPREP_EXTERN int fprep_client_info(fprep_client *client, fprep_result *res);

/* fprep_region: a POSIX shared-memory region created by a client and
 * registered with the daemon, for the zero-copy path: frames written into it
 * and tensors written by the daemon into it never cross the socket. Only
 * over ipc:// connections (the daemon checks the object's owner against the
 * connection's peer UID). */
typedef struct fprep_region fprep_region;

/* fprep_region_open creates a shared-memory object of size bytes (mode 0600,
 * a unique name "/frameprep-PID-N"), maps it, registers it with the daemon
 * over client, then unlinks the name: the memory lives while this process or
 * the daemon maps it, so nothing is left behind if either dies. The daemon
 * releases its mapping when the connection closes. When the daemon runs as
 * another user (the packaged service's "frameprep"), that one user is
 * granted read and write access by a POSIX ACL entry on the object, so the
 * object stays closed to everyone else and still belongs to this process's
 * user (the daemon checks that its owner is the connection's peer). Returns
 * 0, or FPREP_EREGION (shm_open/ftruncate/mmap failed, or the ACL could not
 * be set: the file system of /dev/shm lacks ACL support), FPREP_ENOMEM, or the
 * transport or server error of the REGISTER request (e.g. FPREP_EUNSUPPORTED
 * over tcp://). A REGISTER refused with FPREP_ELIMIT (the daemon's
 * --max-regions or shared-memory budgets) is tried once more after the
 * client closed the stages of fprep_client_request that no result holds,
 * so those never take a program's own region. Any thread, several at
 * once on one client; the region returned is used by one thread at a
 * time. */
FPREP_EXTERN int fprep_region_open(fprep_region **rp, fprep_client *client,
                                   size_t size);

/* fprep_region_open_cuda registers size bytes of this process's device
 * memory at dptr with the daemon (over an ipc:// client), so requests read
 * frames from it and write tensors into it on the GPU: no copy through
 * the host, no payload through the socket. dptr may lie anywhere inside
 * an allocation made by cudaMalloc/cuMemAlloc (a framework's caching
 * allocator, element k of a batch): the library finds the allocation
 * (cuMemGetAddressRange), its CUDA IPC handle and the device's UUID
 * through the CUDA driver, opened at run time (libframeprep does not link
 * it). The daemon opens the handle once on its GPU of that UUID and
 * closes it on fprep_region_close, when the connection closes, or when it
 * stops. The memory must stay allocated until fprep_region_close returned
 * (freeing it while the daemon has it open is undefined behaviour in
 * CUDA). A frame must be complete in device memory (its stream
 * synchronised) before its request is sent; a tensor is complete when the
 * reply arrives. Offsets in requests count from dptr. Returns 0, or
 * FPREP_EUNSUPPORTED (no CUDA driver here, tcp://, a client of several
 * daemons, or a daemon on the CPU backend), FPREP_EINVAL (not device memory,
 * size 0 or past its allocation, memory without an IPC handle, a daemon on
 * another GPU), FPREP_EPERM (the daemon runs with --allow-cuda-regions=false),
 * FPREP_ELIMIT (--max-cuda-regions), FPREP_EREGION, FPREP_ECUDA, or the
 * transport errors of fprep_client_request; fprep_client_last_error says
 * why. Any thread, several at once on one client. */
FPREP_EXTERN int fprep_region_open_cuda(fprep_region **rp, fprep_client *client,
                                        void *dptr, size_t size);

/* fprep_cuda_pointer: a piece of device memory as the daemon is told of
 * it: the CUDA IPC handle of the allocation holding it, its device's UUID
 * and the piece's byte offset from the allocation's start. */
typedef struct fprep_cuda_pointer {
	uint8_t handle[FPREP_CUDA_HANDLE_SIZE]; /* cuIpcGetMemHandle */
	uint8_t uuid[FPREP_CUDA_UUID_SIZE];     /* cuDeviceGetUuid */
	uint64_t offset;     /* the piece's start - the allocation's, bytes */
	uint64_t alloc_size; /* bytes of the whole allocation */
	int ordinal;         /* the device's ordinal in this process */
} fprep_cuda_pointer;

/* fprep_cuda_pointer_lookup fills *out for the size bytes of device
 * memory at dptr, which must lie inside one allocation made by
 * cudaMalloc/cuMemAlloc (the CUDA driver, opened at run time, is asked).
 * Returns 0, or FPREP_EUNSUPPORTED (no CUDA driver in this process),
 * FPREP_EINVAL (size 0, not device memory, not inside one allocation, no
 * IPC handle for it) or FPREP_ECUDA, with a sentence in msg (msg_size
 * bytes). Any thread; the pointer's context is current during the call
 * and restored after. */
FPREP_EXTERN int fprep_cuda_pointer_lookup(const void *dptr, uint64_t size,
                                           fprep_cuda_pointer *out, char *msg,
                                           size_t msg_size);

/* fprep_cuda_pointer_id tells, with one driver call, which allocation
 * holds the device memory at dptr: its buffer ID, unique in the process
 * for its whole life (an allocation made again at the same address has a
 * new one), and its device's ordinal here; a caller that keeps what
 * fprep_cuda_pointer_lookup found per buffer ID looks each allocation up
 * once. Returns 0, or FPREP_EUNSUPPORTED, FPREP_EINVAL (not device memory)
 * or FPREP_ECUDA, with a sentence in msg. Any thread. */
FPREP_EXTERN int fprep_cuda_pointer_id(const void *dptr, uint64_t *buffer_id,
                                       int *ordinal, char *msg,
                                       size_t msg_size);

/* fprep_region_close unregisters r (best effort), unmaps a shared-memory
 * region and frees r; for a CUDA region, once it returns the daemon no
 * longer touches the memory. Requests naming r must have completed. NULL
 * is ignored. Any thread, while other threads make calls on its client
 * (not on r). */
FPREP_EXTERN void fprep_region_close(fprep_region *r);

/* fprep_region_forget unmaps a shared-memory region and frees r without
 * a word to the daemon: for a region whose client was closed (the
 * connection's end dropped the daemon's side) or inherited by a forked
 * child (the parent's connection still holds it). NULL is ignored. The
 * thread that used r last. */
FPREP_EXTERN void fprep_region_forget(fprep_region *r);

/* fprep_region_unregister tells the daemon to drop r now (best effort),
 * and keeps r's mapping until fprep_region_close, so that memory a
 * program still reads (a tensor the daemon wrote there) stays readable.
 * Nothing is sent when the connection r was registered on has closed
 * since: that daemon forgot r, and its id may name another region now
 * (fprep_region_close skips it likewise). Requests naming r must have
 * completed; later ones fail. Any thread, while other threads make calls
 * on its client (not on r). */
FPREP_EXTERN void fprep_region_unregister(fprep_region *r);

/* fprep_region_doorbell asks the daemon to poll a doorbell area
 * (protocol.h, "Doorbells") of entries entries (1 to
 * FPREP_DOORBELL_ENTRIES_MAX) at offset (a multiple of 64) in the
 * shared-memory region r, which the program leaves to the doorbell, so
 * that fprep_region_request posts requests in its entries: a program
 * with several requests in flight (one per entry) gets the doorbell's
 * latency for each, where fprep_client_doorbell serves one call at a
 * time. Returns 0, FPREP_EINVAL (a CUDA region, entries or offset out of
 * range, the area outside r), or the error of the DOORBELL request
 * (FPREP_EPERM: the daemon runs with --max-doorbells 0, FPREP_ELIMIT: at
 * its limit); fprep_client_last_error says why. Call it before requests
 * use the area; the daemon stops polling it when r is unregistered. */
FPREP_EXTERN int fprep_region_doorbell(fprep_region *r, uint64_t offset,
                                       unsigned entries);

/* fprep_region_request sends req, a FRAME or ECHO whose frame and tensor
 * lie in regions of r's client (fprep_request_set_regions), and waits for
 * its reply as fprep_client_request does (same *res, same errors):
 * through entry k of r's doorbell area (fprep_region_doorbell) when the
 * daemon watches it, else through nng, its reply waited for in shared
 * memory when req->shm_reply asks for it. k past the area's entries, or
 * no area: through nng. Before anything is sent it checks that r is still
 * registered: FPREP_EREGION when r was unregistered or the connection it
 * was registered on has closed (the daemon restarted: the program opens
 * a new region and sends again). A connection that closes while the call
 * waits for its reply in shared memory or in the entry ends the call
 * with FPREP_ETRANSPORT within about 10 ms, not at the timeout. A
 * request the daemon took from the entry and never answered within the
 * timeout fails with FPREP_ETIMEDOUT, and r's area is not used again.
 * Any thread, several at once on one client, one call at a time for each
 * entry k (the caller keeps the entries apart); calls with k past the
 * entries may overlap. */
FPREP_EXTERN int fprep_region_request(fprep_region *r, unsigned k,
                                      fprep_request *req, fprep_result *res);

/* fprep_region_base returns the start of r's mapping (page-aligned), or
 * for a CUDA region the device pointer it was opened with. */
FPREP_EXTERN void *fprep_region_base(const fprep_region *r);

/* fprep_region_size returns the size of r in bytes. */
FPREP_EXTERN size_t fprep_region_size(const fprep_region *r);

/* fprep_region_id returns the id the daemon gave r. */
FPREP_EXTERN uint32_t fprep_region_id(const fprep_region *r);

/* fprep_region_location returns FPREP_LOC_SHM or FPREP_LOC_CUDA: where
 * requests naming r find their frame or put their tensor. */
FPREP_EXTERN int fprep_region_location(const fprep_region *r);

/* fprep_request_set_regions points req at registered regions of either
 * kind: the frame is the req->input_size bytes at in_offset of region in
 * (NULL: inline input), the tensor goes to out_offset of region out (NULL:
 * inline output), with out_capacity bytes available there; input_loc and
 * output_loc become the regions' locations (SHM or CUDA). Offsets are not
 * checked here; the daemon checks them. */
FPREP_EXTERN void
fprep_request_set_regions(fprep_request *req, const fprep_region *in,
                          uint64_t in_offset, const fprep_region *out,
                          uint64_t out_offset, uint64_t out_capacity);

/* fprep_request_set_shm is fprep_request_set_regions under its first
 * name (it takes CUDA regions too). */
FPREP_EXTERN void
fprep_request_set_shm(fprep_request *req, const fprep_region *in,
                      uint64_t in_offset, const fprep_region *out,
                      uint64_t out_offset, uint64_t out_capacity);

#ifdef __cplusplus
}
#endif

#endif /* FRAMEPREP_FRAMEPREP_H */
