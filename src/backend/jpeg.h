/*
 * jpeg.h: JPEG source frames (src_format FPREP_PIX_JPEG) decoded on a CPU
 * with libjpeg-turbo, by the CPU backend's workers and by the GPU lane
 * (into its pinned staging slot) alike.
 *
 * A job's JPEG is turned into a raw frame in two steps: fprep__jpeg_open
 * reads the header and checks it against the daemon's limits before
 * anything is allocated; the caller then finds room for the decoded frame
 * (fprep__jpeg_buffer, or a staging slot) and fprep__jpeg_decode writes it
 * there and rewrites the job as a job on that raw frame (request, input,
 * transform), so the letterbox code never sees a JPEG.
 *
 * Read once: a JPEG in a client's shared memory can change while the
 * daemon reads it (the client is another process). fprep__jpeg_open first
 * copies such bytes into memory of the daemon's own (a fprep__jpeg_copy)
 * and points the job there, so the header that was checked is the header
 * that is decoded, by libjpeg-turbo or by nvJPEG; fprep__jpeg_decode also
 * refuses a frame whose size is not the checked one, so a decode fills
 * exactly the raw->input_size bytes it was given and no pixel of an
 * earlier frame stays in a buffer handed to the reply.
 *
 * Bounded cost: a progressive JPEG may carry hundreds of scans, each a
 * pass over every coefficient block, so a small file can cost seconds of
 * CPU. The decode stops a file past limits->max_jpeg_scans scans, or past
 * limits->max_jpeg_scan_pixels (scans x pixels of the frame), with
 * FPREP_ELIMIT.
 */
#ifndef FPREP_JPEG_H
#define FPREP_JPEG_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"

/* The caps used where job->limits leaves max_jpeg_scans or
 * max_jpeg_scan_pixels at 0. */
#define FPREP__JPEG_SCANS_DEFAULT       32u
#define FPREP__JPEG_SCAN_PIXELS_DEFAULT (1ull << 28)

/* fprep__jpeg_copy: memory of the daemon's own holding a JPEG that lay in
 * a client's shared memory (grown to the largest file, kept). Zeroed
 * before first use; fprep__jpeg_copy_free frees what it holds. */
typedef struct fprep__jpeg_copy {
	uint8_t *p;
	size_t cap;
} fprep__jpeg_copy;

void fprep__jpeg_copy_free(fprep__jpeg_copy *c);

/* fprep__jpeg: one thread's decoder (a libjpeg-turbo decompressor, which
 * holds the header fprep__jpeg_open read until fprep__jpeg_decode), its
 * own JPEG copy and its frame buffer, which grows to the largest frame
 * decoded and is kept. Used by one thread at a time. */
typedef struct fprep__jpeg {
	struct fprep__jpeg_dec *dec; /* NULL when it could not be made */
	uint8_t *buf;                /* fprep__jpeg_buffer's frame, cap bytes */
	size_t cap;
	fprep__jpeg_copy copy; /* the JPEG, when it lay in a client's memory
	                          and the caller named no copy of its own */
	uint64_t t0_ns;        /* when fprep__jpeg_open began */
	int colorspace; /* the last header's TJCS value (TJCS_YCbCr, ...) */
} fprep__jpeg;

/* fprep__jpeg_init sets *j up; a handle that could not be made makes
 * every fprep__jpeg_open fail with FPREP_ENOMEM (and a message), so a
 * thread need not check. fprep__jpeg_fini frees what *j holds. */
void fprep__jpeg_init(fprep__jpeg *j);
void fprep__jpeg_fini(fprep__jpeg *j);

/* fprep__jpeg_open first makes job's JPEG (job->input,
 * job->req.input_size bytes, host memory) the daemon's own: when it lies
 * in a client's region (job->in_region) and job->input_copied is 0, it is
 * copied into *copy (j's own copy when copy is NULL; grown as needed) and
 * job->input points there, input_copied = 1. The copy must outlive the
 * job's decode. It then reads the header and checks it: the SOF's size
 * against job->limits (max_width, max_height, and its RGB8 bytes against
 * max_frame_bytes), the wire's src_width/src_height (0 or equal), the
 * colour space (gray, YCbCr or RGB; CMYK and YCCK refused), and what
 * libjpeg-turbo refuses in a header (12-bit, unknown sampling, corrupt
 * markers). Nothing is allocated. On success fills *raw with job->req
 * rewritten as the decoded frame: src_format GRAY8 (channel_order GRAY),
 * else RGB8 or BGR8 as channel_order asks, the size, the stride and
 * input_size. Returns FPREP_OK, FPREP_ELIMIT or FPREP_EINVAL (or
 * FPREP_ENOMEM) with a sentence in msg naming what is wrong. */
int fprep__jpeg_open(fprep__jpeg *j, fprep__job *job, fprep__jpeg_copy *copy,
                     fprep_request *raw, char *msg, size_t msg_size);

/* fprep__jpeg_buffer returns j's frame buffer with room for n bytes,
 * growing it when n is more than it holds; NULL when out of memory. */
uint8_t *fprep__jpeg_buffer(fprep__jpeg *j, size_t n);

/* fprep__jpeg_decode decodes job's JPEG, whose header fprep__jpeg_open
 * (the call just before, on the same j and job) read into *raw, into dst
 * (raw->input_size bytes), without reading the header again.
 * libjpeg-turbo's warnings (corrupt data, a premature end) are errors: a
 * frame is either decoded whole, every row of dst written, or refused.
 * On success job becomes a job on that frame: job->req = *raw, job->input
 * = dst, job->xf recomputed, and job->decoded_width/height and
 * t_decode_us (since fprep__jpeg_open) filled. Returns FPREP_OK,
 * FPREP_ELIMIT (past the scan caps) or FPREP_EINVAL with libjpeg-turbo's
 * words in msg (or FPREP_ENOMEM); job is unchanged on failure. */
int fprep__jpeg_decode(fprep__jpeg *j, fprep__job *job,
                       const fprep_request *raw, uint8_t *dst, char *msg,
                       size_t msg_size);

/* fprep__jpeg_adopt makes job a job on its decoded frame, once that
 * frame lies at frame (host or device memory: it is only stored): job->req
 * = *raw (as fprep__jpeg_open filled it), job->input = frame, job->xf
 * recomputed, job->decoded_width/height and t_decode_us (since t0_ns,
 * CLOCK_MONOTONIC) filled. fprep__jpeg_decode ends with it; a decoder that
 * writes the frame elsewhere (nvJPEG, on the GPU) calls it itself. */
void fprep__jpeg_adopt(fprep__job *job, const fprep_request *raw,
                       const uint8_t *frame, uint64_t t0_ns);

/* fprep__jpeg_t0 returns when j's last fprep__jpeg_open began
 * (CLOCK_MONOTONIC nanoseconds). */
uint64_t fprep__jpeg_t0(const fprep__jpeg *j);

/* fprep__jpeg_encode_test encodes a width x height picture of colour
 * gradients under a fixed pseudo-random grain as a baseline JPEG (4:2:0,
 * quality 90: what cameras and cv2.imwrite make) into *out, of *size
 * bytes, to be freed with fprep__jpeg_free. For warming a decoder up: the
 * grain makes the file larger than a photograph of that size (about 0.5
 * bytes a pixel against 0.1 for 1080p photographs at q90), so buffers
 * sized by the warm-up also hold the photographs' bitstreams. Returns 0,
 * or -1 (no memory, or libjpeg-turbo failed). Any thread. */
int fprep__jpeg_encode_test(unsigned width, unsigned height, uint8_t **out,
                            size_t *size);

/* fprep__jpeg_free frees what fprep__jpeg_encode_test made; NULL is
 * ignored. */
void fprep__jpeg_free(uint8_t *p);

/* fprep__jpeg_sequential tells whether the n bytes at p are a JPEG that
 * a sequential 8-bit Huffman decoder of one scan can take whole: SOF0 or
 * SOF1 with 8-bit samples and 1 or 3 components, one scan holding every
 * component, and entropy-coded data that holds only byte stuffing and
 * restart markers up to an EOI. Returns 1 or 0: progressive, arithmetic,
 * lossless and 12-bit files, several scans, a truncated file (no EOI) or
 * a stray marker in the data all give 0. Reads only; for choosing a
 * decoder (a GPU's JPEG engine takes exactly these), not a validation:
 * a file it accepts may still be corrupt inside its Huffman data. */
int fprep__jpeg_sequential(const uint8_t *p, uint64_t n);

#endif /* FPREP_JPEG_H */
