/*
 * nvjpeg_decode.h: JPEG frames decoded by the GPU's JPEG engine (nvJPEG's
 * hardware backend, A100/H100/H200 and later) for a GPU lane, straight
 * into the device buffer that the letterbox kernel reads.
 *
 * libnvjpeg is loaded at run time (dlopen), so the daemon starts and
 * decodes JPEG frames on its CPU threads where it is missing; the
 * environment variable FPREP_NVJPEG names the library's file to load
 * instead, or turns it off ("off").
 */
#ifndef FPREP_NVJPEG_DECODE_H
#define FPREP_NVJPEG_DECODE_H

#include <stddef.h>
#include <stdint.h>

/* The most JPEGs one fprep__nvjpeg_decode call takes. A decoder keeps an
 * nvJPEG state per batch size it has used; the GPU lane's decoders use
 * sizes 1 to 8 and multiples of 8 above (at most 11 states a thread). */
#define FPREP__NVJPEG_BATCH_MAX 32
_Static_assert(FPREP__NVJPEG_BATCH_MAX % 8 == 0,
               "FPREP__NVJPEG_BATCH_MAX: a multiple of 8");

/* fprep__nvjpeg: a lane's library handle (nvjpegHandle_t), shared by
 * its threads (nvJPEG's handle is thread-safe). fprep__nvjpeg_dec: one
 * thread's decoder on it (a parsed-stream object and the batch states,
 * which nvJPEG does not let two threads share). */
typedef struct fprep__nvjpeg fprep__nvjpeg;
typedef struct fprep__nvjpeg_dec fprep__nvjpeg_dec;

/* fprep__nvjpeg_item: one JPEG of a batch: its bytes (host memory, kept
 * until the decode's stream work has run) and where its frame goes:
 * device memory of pitch bytes a row (width * 3 for RGB/BGR, width for
 * gray), rows of the JPEG's height. */
typedef struct fprep__nvjpeg_item {
	const uint8_t *data;
	size_t size;
	uint8_t *dst;
	size_t pitch;
} fprep__nvjpeg_item;

/* fprep__nvjpeg_open makes a handle on the calling thread's current CUDA
 * device: loads libnvjpeg (once per process; one log line says whether
 * and from where) and creates a handle on the hardware backend, with
 * interpolated chroma upsampling (libjpeg's "fancy" upsampling, as
 * cv2.imdecode does). Returns 0 and *np, or -1 with a sentence in msg
 * saying why not (library missing or turned off, no JPEG engine on this
 * GPU, built without nvjpeg.h); then the lane decodes on its CPU
 * threads. */
int fprep__nvjpeg_open(fprep__nvjpeg **np, char *msg, size_t msg_size);

/* fprep__nvjpeg_close frees nj (NULL: nothing) once every decoder made
 * on it is closed; the thread's current device must be nj's. */
void fprep__nvjpeg_close(fprep__nvjpeg *nj);

/* fprep__nvjpeg_describe returns a line naming the library's version and
 * backend, e.g. "nvJPEG 13.0.3, hardware engine (7 engines)". */
const char *fprep__nvjpeg_describe(const fprep__nvjpeg *nj);

/* fprep__nvjpeg_dec_open makes a decoder on nj for the calling thread
 * (nj's device current). Returns 0 and *dp, or -1 with nvJPEG's status
 * in msg. Its batch states are made when a batch of their size first
 * comes. fprep__nvjpeg_dec_close frees d (NULL: nothing), on the thread
 * that used it, before nj is closed. */
int fprep__nvjpeg_dec_open(fprep__nvjpeg *nj, fprep__nvjpeg_dec **dp, char *msg,
                           size_t msg_size);
void fprep__nvjpeg_dec_close(fprep__nvjpeg_dec *d);

/* fprep__nvjpeg_supported tells whether the engine takes the JPEG of n
 * bytes at p (nvjpegDecodeBatchedSupported, after its header is parsed:
 * nvjpegJpegStreamParseHeader reads the markers up to the scan, not the
 * entropy-coded data): 1 or 0. The caller has checked it with
 * fprep__jpeg_sequential. d's thread. */
int fprep__nvjpeg_supported(fprep__nvjpeg_dec *d, const uint8_t *p, size_t n);

/* fprep__nvjpeg_decode queues the decode of n (1 to
 * FPREP__NVJPEG_BATCH_MAX) JPEGs on stream (a cudaStream_t): interleaved
 * RGB, interleaved BGR or luma, as gray is 0 and bgr 0 or 1, or gray 1.
 * The call parses every bitstream on this thread and may wait there for
 * the engine (the hardware backend does: this is why each decoding
 * thread has its own d); work that reads the frames must be ordered
 * after it on stream (an event recorded there). Returns 0, or -1 with nvJPEG's
 * status in msg: then none of the frames may be used (decode them
 * otherwise, once stream's work is done). d's thread. */
int fprep__nvjpeg_decode(fprep__nvjpeg_dec *d, const fprep__nvjpeg_item *items,
                         unsigned n, int bgr, int gray, void *stream, char *msg,
                         size_t msg_size);

#endif /* FPREP_NVJPEG_DECODE_H */
