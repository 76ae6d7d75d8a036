/*
 * cuda_decoder.c: a GPU lane's JPEG decoders (backend_cuda.c).
 *
 * JPEG frames are decoded before any of that, off the lane thread: the
 * lane gives each JPEG frame's slot to its decoders (decode_q), a small
 * pool of threads, and does nothing else with it until a decoder hands
 * the slot back (the decoded queue). Decoders take the slots of decode_q
 * by turns of their clients, not in arrival order (jpeg_turns.h: by uid,
 * then connection, each decode's time charged to its client: the CPU
 * decode's, or a share of the engine's call), as the lane gives JPEG
 * frames their slots (slot_q, cuda_lane.c): a decode's time is charged in
 * both turns when the slot comes back (decoder_back). With a JPEG engine
 * (nvjpeg_decode.h: nvJPEG's hardware backend, A100/H100/H200) a decoder takes
 * the frames queued with the same channel order, up to a batch
 * (FPREP_NVJPEG_BATCH, 32), checks their headers (a refusal is answered at
 * once) and queues those the engine takes in one batched decode on its own
 * stream, with its own nvJPEG states: the compressed bytes go to the GPU, the
 * engine writes each frame into its slot's device input, an event (ev_dec) is
 * recorded after it, and the letterbox kernel, ordered after that event,
 * reads the frame there as one in device memory (no H2D of pixels, no
 * host round trip). nvJPEG runs one batched call at a time and only a
 * batch spreads over the engine's cores, so a decoder calls at once when
 * the engine is idle (a lone frame never waits) and otherwise gathers:
 * until the batch in the engine is decoded or its own is full, it takes
 * the frames as they come and checks their headers
 * (decoder_gathers), so the frames that come during one batch make
 * the next and its host work overlaps the engine's. What the
 * engine does not take (progressive, arithmetic, several scans, 4:1:1,
 * RGB or CMYK colour, a truncated file: fprep__jpeg_sequential) and a
 * batch it fails are decoded by the same decoder with libjpeg-turbo into
 * the slot's pinned input, and go back to the lane as frames with nothing
 * left to copy into the slot; optional CPU helpers
 * (FPREP_JPEG_CPU_HELPERS) do the same with frames of a long queue while
 * the engine is busy. Without an engine every JPEG frame goes that way,
 * a frame a decoder. The slots past the first raw_slots are kept for JPEG
 * frames (fprep__cuda_decoder_plan: a batch per engine decoder and half a batch
 * for the frames past the engine, two per CPU decoder; their buffers
 * made when first used, an engine's frame with device memory only), so
 * frames in decode never hold up raw frames.
 * Where the time goes (queue, header checks, gather, the engine's call,
 * libjpeg-turbo, the hand-back, the lane after it) is counted: INFO
 * "jpeg_timing", "jpeg_timing_lone" for frames decoded with nothing else
 * in the lane (what a request at concurrency 1 pays), "jpeg_timing_max"
 * for the longest single wait of each stage (where a tail comes from),
 * and lines at close. With the lane polling (spin_ns), one idle decoder at a
 * time polls for the next JPEG frame before it sleeps, as the lane does for its
 * jobs.
 */
#include "gpu/cuda_core_internal.h"

/* decoder_queued counts the slots in decode_q; with cb->mu held. */
static unsigned decoder_queued(const cuda_backend *cb)
{
	return cb->decode_q.queued;
}

/* decoder_helped tells whether the lane's CPU helpers take frames now: the
 * engine is busy (calls_max decoders in it), frames are queued, and more
 * than help_min wait for the engine (queued, or in a batch being
 * gathered). With cb->mu held. */
static int decoder_helped(const cuda_backend *cb)
{
	return cb->helpers > 0 && cb->engine_calls >= cb->calls_max &&
	       decoder_queued(cb) > 0 &&
	       decoder_queued(cb) + cb->gathered > cb->help_min;
}

void fprep__cuda_decoder_start(cuda_backend *cb, cuda_slot *s)
{
	pthread_mutex_lock(&cb->mu);
	fprep__jpeg_turns_push(&cb->decode_q, &s->link, s->job->uid,
	                       s->job->conn);
	cb->decoding++;
	atomic_fetch_add_explicit(&cb->decode_kicks, 1, memory_order_release);
	if (!cb->decoder_polling) /* else the polling one takes it */
		pthread_cond_signal(&cb->cv_decode);
	if (decoder_helped(cb))
		pthread_cond_signal(&cb->cv_help);
	pthread_mutex_unlock(&cb->mu);
}

/* cuda_decoder: one decoder thread's own: its libjpeg-turbo handle and,
 * with a JPEG engine, its nvJPEG decoder, the stream its batches are
 * queued on and an event recorded after each (nvjd NULL: libjpeg-turbo
 * only); and the batch it gathers: frames whose headers it checked, for
 * the engine (eng, with their items, headers and start times) and for
 * libjpeg-turbo (cpu), all of one channel order. */
typedef struct cuda_decoder {
	fprep__jpeg j;
	fprep__nvjpeg_dec *nvjd;
	cudaStream_t stream;
	cudaEvent_t ev_batch; /* gate_done: the batch's end */
	cuda_slot *eng[FPREP__NVJPEG_BATCH_MAX], *cpu[FPREP__NVJPEG_BATCH_MAX];
	fprep__nvjpeg_item it[FPREP__NVJPEG_BATCH_MAX];
	fprep_request raw[FPREP__NVJPEG_BATCH_MAX];
	uint64_t t0[FPREP__NVJPEG_BATCH_MAX];
	unsigned n, nc;    /* in eng, in cpu */
	unsigned taken;    /* frames taken for it (counted in cb->gathered) */
	uint8_t order;     /* the batch's channel order (n + nc > 0) */
	uint64_t first_ns; /* when its first frame was taken */
} cuda_decoder;

/* decoder_back hands slots ss[0..n) back: those with ok[i] to the
 * lane (the decoded queue), the others answered (their job's reply is
 * set). A decoder's thread, cb->mu not held. */
static void decoder_back(cuda_backend *cb, cuda_slot **ss, const int *ok,
                         unsigned n)
{
	uint64_t now = cuda_core_now_ns();

	for (unsigned i = 0; i < n; i++)
		if (!ok[i])
			fprep__cuda_wait_deliver(cb, ss[i], ss[i]->job);
	pthread_mutex_lock(&cb->mu);
	for (unsigned i = 0; i < n; i++) {
		fprep__jpeg_turns_charge(&cb->decode_q, &ss[i]->turn,
		                         ss[i]->decode_us);
		fprep__jpeg_turns_charge(&cb->slot_q, &ss[i]->slot_turn,
		                         ss[i]->decode_us);
		if (ok[i]) {
			ss[i]->t_back_ns = now;
			fprep__queue_push(&cb->decoded, &ss[i]->link);
		}
		cb->decoding--;
	}
	cuda_core_kick(&cb->cv_lane, &cb->lane_kicks);
	pthread_mutex_unlock(&cb->mu);
}

/* decoder_cpu_decode decodes the JPEG of s's job with libjpeg-turbo (j) into
 * s's pinned input, grown to hold the frame, and makes the job one on
 * that frame. Returns 0, or the error with the job's reply set. A
 * decoder's thread. */
static int decoder_cpu_decode(cuda_backend *cb, fprep__jpeg *j, cuda_slot *s,
                              fprep__job *job)
{
	fprep__gpu_status st = {0};
	fprep_request raw;
	uint64_t t = cuda_core_now_ns();

	CUDA_JSTAT(cb, s, cpu_frames, 1);
	job->status = fprep__jpeg_open(j, job, &s->jpeg_copy, &raw,
	                               job->message, sizeof job->message);
	if (job->status == FPREP_OK &&
	    fprep__cuda_slot_reserve(s, raw.input_size, 0,
	                             cb->transfer != FPREP__CUDA_STAGED, &st)) {
		cuda_core_fail(job,
		               st.code == cudaErrorMemoryAllocation
		                       ? FPREP_ENOMEM
		                       : FPREP_ECUDA,
		               cuda_core_sticky(st.code), st.text);
	} else if (job->status == FPREP_OK) {
		job->status =
		        fprep__jpeg_decode(j, job, &raw, s->h_in, job->message,
		                           sizeof job->message);
	}
	CUDA_JSTAT(cb, s, cpu_ns, cuda_core_now_ns() - t);
	s->decode_us += (uint32_t)((cuda_core_now_ns() - t) / 1000);
	if (job->status != FPREP_OK)
		return job->status;
	job->input_pinned = 0; /* in the slot: staged from there */
	s->staged = 1;
	atomic_fetch_add_explicit(&cb->jpeg_cpu, 1, memory_order_relaxed);
	return 0;
}

/* decoder_engine_take checks the header of s's job (j) and, when the engine
 * takes it, grows s's device buffers for the frame and fills *it (into
 * s's device input), *raw and *t0. Returns 1: for the engine; 0: for
 * libjpeg-turbo; -1: answered (refused, or no memory for it). A
 * decoder's thread. */
static int decoder_engine_take(cuda_backend *cb, cuda_decoder *d, cuda_slot *s,
                               fprep__nvjpeg_item *it, fprep_request *raw,
                               uint64_t *t0)
{
	fprep__job *jb = s->job;
	fprep__gpu_status st = {0};
	uint64_t t = cuda_core_now_ns();
	int take;

	jb->status = fprep__jpeg_open(&d->j, jb, &s->jpeg_copy, raw,
	                              jb->message, sizeof jb->message);
	take = jb->status == FPREP_OK &&
	       (d->j.colorspace == TJCS_YCbCr ||
	        d->j.colorspace == TJCS_GRAY) &&
	       fprep__jpeg_sequential(jb->input, jb->req.input_size) &&
	       fprep__nvjpeg_supported(d->nvjd, jb->input,
	                               (size_t)jb->req.input_size);
	CUDA_JSTAT(cb, s, parse_ns, cuda_core_now_ns() - t);
	if (jb->status != FPREP_OK)
		return -1;
	if (!take)
		return 0;
	if (fprep__cuda_slot_reserve_dev(s, raw->input_size, &st) ||
	    fprep__cuda_slot_reserve(s, 0,
	                             jb->output_device ? 0 : jb->output_size,
	                             cb->transfer != FPREP__CUDA_STAGED, &st)) {
		cuda_core_fail(jb,
		               st.code == cudaErrorMemoryAllocation
		                       ? FPREP_ENOMEM
		                       : FPREP_ECUDA,
		               cuda_core_sticky(st.code), st.text);
		return -1;
	}
	*t0 = fprep__jpeg_t0(&d->j);
	*it = (fprep__nvjpeg_item){jb->input, (size_t)jb->req.input_size,
	                           s->d_in, raw->src_stride};
	return 1;
}

/* decoder_engine_run queues the engine's batch of ss[0..n) (items it, headers
 * raw, begun at t0) on d's stream and records each slot's ev_dec after
 * it (and d's ev_batch with gate_done): the jobs become jobs on frames in
 * device memory. Returns 0, or -1 when nvJPEG refused the batch or an
 * event was not recorded: the caller decodes them with libjpeg-turbo (the
 * stream's work is done by then). A decoder's thread. */
static int decoder_engine_run(cuda_backend *cb, cuda_decoder *d, cuda_slot **ss,
                              const fprep__nvjpeg_item *it,
                              const fprep_request *raw, const uint64_t *t0,
                              unsigned n)
{
	uint8_t order = ss[0]->job->req.channel_order;
	fprep__gpu_status st = {0};
	char msg[FPREP_MESSAGE_SIZE];
	uint64_t t = cuda_core_now_ns();
	int rc = 0;

	/* The engine does not check that a file's data fills the frame its
	 * header names: it leaves what it did not reach as it was. Cleared
	 * first, so that what it was (an earlier frame in this slot, another
	 * client's) never shows in a tensor. The clear is waited for here:
	 * the engine starts on the call, not after the work queued before it
	 * on the stream (on the H200, a clear queued on d->stream behind a
	 * busy GPU landed after the engine's frame: 1 tensor of 37,095 all
	 * zeros at c=64). The stream holds only this decoder's batches, the
	 * last of which the gate has seen done, so this waits for the clear
	 * alone. */
	for (unsigned i = 0; i < n && rc == 0; i++)
		if (FPREP__CUDA(&st,
		                cudaMemsetAsync(it[i].dst, 0, raw[i].input_size,
		                                d->stream))) {
			snprintf(msg, sizeof msg, "%s", st.text);
			rc = -1;
		}
	if (rc == 0 && FPREP__CUDA(&st, cudaStreamSynchronize(d->stream))) {
		snprintf(msg, sizeof msg, "%s", st.text);
		rc = -1;
	}
	if (rc == 0)
		rc = fprep__nvjpeg_decode(
		        d->nvjd, it, n, order == FPREP_ORDER_BGR,
		        order == FPREP_ORDER_GRAY, d->stream, msg, sizeof msg);

	/* A batch of one counts among the lone frames' when it is one. */
	CUDA_JSTAT(cb, ss[0], call_ns, cuda_core_now_ns() - t);
	for (unsigned i = 0; i < n; i++) /* the call's time, shared */
		ss[i]->decode_us +=
		        (uint32_t)((cuda_core_now_ns() - t) / 1000 / n);
	CUDA_JSTAT(cb, ss[0], batches, 1);
	CUDA_JSTAT(cb, ss[0], batch_frames, n);
	for (unsigned i = 0; i < n && rc == 0; i++)
		if (FPREP__CUDA(&st,
		                cudaEventRecord(ss[i]->ev_dec, d->stream))) {
			snprintf(msg, sizeof msg, "%s", st.text);
			rc = -1;
		}
	if (rc == 0 && cb->gate_done &&
	    FPREP__CUDA(&st, cudaEventRecord(d->ev_batch, d->stream))) {
		snprintf(msg, sizeof msg, "%s", st.text);
		rc = -1;
	}
	if (rc != 0) {
		fprep__log(FPREP_LOG_WARNING, "%s: decoded by libjpeg-turbo",
		           msg);
		/* What the engine may still write into the slots is done
		 * before libjpeg-turbo's frames are copied there. */
		(void)FPREP__CUDA(NULL, cudaStreamSynchronize(d->stream));
		return -1;
	}
	for (unsigned i = 0; i < n; i++) {
		fprep__jpeg_adopt(ss[i]->job, &raw[i], ss[i]->d_in, t0[i]);
		ss[i]->d_frame = ss[i]->d_in;
	}
	atomic_fetch_add_explicit(&cb->jpeg_engine, n, memory_order_relaxed);
	return 0;
}

/* decoder_engine_release: a decoder is out of the engine (its call returned,
 * or with gate_done its batch was decoded): the decoders gathering may
 * call now. A decoder's thread, cb->mu not held. */
static void decoder_engine_release(cuda_backend *cb)
{
	pthread_mutex_lock(&cb->mu);
	cb->engine_calls--;
	pthread_cond_broadcast(&cb->cv_decode);
	pthread_mutex_unlock(&cb->mu);
}

/* decoder_check checks the headers of the slots ss[0..m) the decoder
 * took and adds them to its batch: for the engine (decoder_engine_take), for
 * libjpeg-turbo, or answered at once (refused). A decoder's thread,
 * cb->mu not held. */
static void decoder_check(cuda_backend *cb, cuda_decoder *d, cuda_slot **ss,
                          unsigned m)
{
	for (unsigned i = 0; i < m; i++) {
		int k = d->nvjd == NULL ? 0
		                        : decoder_engine_take(
		                                  cb, d, ss[i], &d->it[d->n],
		                                  &d->raw[d->n], &d->t0[d->n]);
		int refused = 0;

		if (k > 0)
			d->eng[d->n++] = ss[i];
		else if (k == 0)
			d->cpu[d->nc++] = ss[i];
		else
			decoder_back(cb, &ss[i], &refused, 1);
	}
}

/* decoder_finish decodes d's batch: the engine's frames in batches
 * of the sizes decoder_batch_size gives (nvJPEG keeps a state per size), each
 * handed back as soon as it is queued (decoder_engine_run; those of a batch
 * it refused join the others), the decoder leaving the engine
 * (decoder_engine_release) once they are decoded (gate_done) or queued; then
 * the others with libjpeg-turbo, each handed back when done. A decoder
 * counted in engine_calls (engaged) leaves it here. A decoder's thread,
 * cb->mu not held. */
static unsigned decoder_batch_size(unsigned n);
static void decoder_finish(cuda_backend *cb, cuda_decoder *d, int engaged)
{
	int ok[FPREP__NVJPEG_BATCH_MAX], queued = 0, lone = 0;

	for (unsigned i = 0, k; i < d->n; i += k) {
		k = decoder_batch_size(d->n - i);
		if (decoder_engine_run(cb, d, &d->eng[i], &d->it[i], &d->raw[i],
		                       &d->t0[i], k) == 0) {
			for (unsigned j = 0; j < k; j++)
				ok[j] = 1;
			lone |= d->eng[i]->lone;
			decoder_back(cb, &d->eng[i], ok, k);
			queued = 1;
		} else {
			for (unsigned j = 0; j < k; j++)
				d->cpu[d->nc++] = d->eng[i + j];
		}
	}
	if (queued && cb->gate_done) {
		uint64_t t = cuda_core_now_ns();

		(void)FPREP__CUDA(NULL, cudaEventSynchronize(d->ev_batch));
		t = cuda_core_now_ns() - t;
		atomic_fetch_add_explicit(&cb->jstats.sync_ns, t,
		                          memory_order_relaxed);
		if (lone)
			atomic_fetch_add_explicit(&cb->jlone.sync_ns, t,
			                          memory_order_relaxed);
		cuda_core_stat_max(&cb->jmax.sync_ns, t);
	}
	if (engaged)
		decoder_engine_release(cb);
	for (unsigned i = 0; i < d->nc; i++) {
		int one = decoder_cpu_decode(cb, &d->j, d->cpu[i],
		                             d->cpu[i]->job) == 0;
		decoder_back(cb, &d->cpu[i], &one, 1);
	}
	d->n = d->nc = 0;
}

/* decoder_batch_size: the batch sizes a decoder calls the engine with
 * (nvJPEG keeps a state per size, each with buffers for that many frames):
 * n up to 8, above that n rounded down to a multiple of 8. */
static unsigned decoder_batch_size(unsigned n)
{
	return n <= 8 ? n : n & ~7u;
}

/* decoder_take pops up to room slots from decode_q, each whose turn
 * it is (jpeg_turns.h), into ss, while they have the channel order of d's
 * batch (any, for a batch still empty). Returns how many. With cb->mu
 * held. */
static unsigned decoder_take(cuda_backend *cb, const cuda_decoder *d,
                             cuda_slot **ss, unsigned room)
{
	unsigned m = 0;

	fprep__qnode *q;

	while (m < room &&
	       (q = fprep__jpeg_turns_peek(&cb->decode_q)) != NULL) {
		cuda_slot *s = fprep__container_of(q, cuda_slot, link);
		uint8_t order = m > 0 ? ss[0]->job->req.channel_order
		                : d->n + d->nc > 0 ? d->order
		                                   : s->job->req.channel_order;
		if (s->job->req.channel_order != order)
			break;
		(void)fprep__jpeg_turns_pop(&cb->decode_q, &s->turn);
		s->decode_us = 0;
		ss[m++] = s;
	}
	return m;
}

/* decoder_open sets d up on a decoder's thread: libjpeg-turbo, and
 * with engine (and an engine on the lane) its nvJPEG decoder, stream and
 * event (where one cannot be made, a warning and libjpeg-turbo only). */
static void decoder_open(cuda_backend *cb, cuda_decoder *d, int engine)
{
	char why[160];

	memset(d, 0, sizeof *d);
	fprep__jpeg_init(&d->j);
	/* The device current for the slots' buffers, helpers too. */
	if (FPREP__CUDA(NULL, cudaSetDevice(cb->device)) || !engine ||
	    cb->nvjpeg == NULL)
		return;
	if (fprep__nvjpeg_dec_open(cb->nvjpeg, &d->nvjd, why, sizeof why)) {
		fprep__log(FPREP_LOG_WARNING,
		           "GPU %d JPEG decoder: %s: libjpeg-turbo only",
		           cb->device, why);
		return;
	}
	if (FPREP__CUDA(NULL, cudaStreamCreateWithFlags(
	                              &d->stream, cudaStreamNonBlocking)) ||
	    FPREP__CUDA(NULL, cudaEventCreateWithFlags(
	                              &d->ev_batch,
	                              cudaEventBlockingSync |
	                                      cudaEventDisableTiming))) {
		fprep__log(FPREP_LOG_WARNING,
		           "GPU %d JPEG decoder: no stream or event: "
		           "libjpeg-turbo only",
		           cb->device);
		fprep__nvjpeg_dec_close(d->nvjd);
		d->nvjd = NULL;
	}
}

static void decoder_close(cuda_decoder *d)
{
	if (d->stream != NULL) {
		(void)FPREP__CUDA(NULL, cudaStreamSynchronize(d->stream));
		(void)FPREP__CUDA(NULL, cudaStreamDestroy(d->stream));
	}
	if (d->ev_batch != NULL)
		(void)FPREP__CUDA(NULL, cudaEventDestroy(d->ev_batch));
	fprep__nvjpeg_dec_close(d->nvjd);
	fprep__jpeg_fini(&d->j);
}

/* decoder_poll_kicks polls *kicks, with cb->mu let go, until it differs
 * from what it was on entry or for ns; returns whether it changed. With
 * cb->mu held. */
static int decoder_poll_kicks(cuda_backend *cb, atomic_uint *kicks, uint64_t ns)
{
	unsigned k = atomic_load_explicit(kicks, memory_order_relaxed);
	uint64_t until = cuda_core_now_ns() + ns;

	pthread_mutex_unlock(&cb->mu);
	while (atomic_load_explicit(kicks, memory_order_acquire) == k &&
	       cuda_core_now_ns() < until)
		CUDA_CPU_RELAX();
	pthread_mutex_lock(&cb->mu);
	return atomic_load_explicit(kicks, memory_order_relaxed) != k;
}

/* decoder_poll: with the lane polling (spin_ns), one idle decoder
 * at a time polls decode_kicks for up to spin_ns instead of sleeping, so
 * the next frame at low load does not wait for a thread to wake (tens of
 * microseconds); fprep__cuda_decoder_start then signals no one. With cb->mu
 * held (let go meanwhile); the caller takes what came. */
static void decoder_poll(cuda_backend *cb)
{
	cb->decoder_polling = 1;
	(void)decoder_poll_kicks(cb, &cb->decode_kicks, cb->spin_ns);
	cb->decoder_polling = 0;
}

/* Defaults: the longest a decoder gathers while the engine is busy
 * (FPREP_NVJPEG_GATHER_US), and a lane's decoder threads with a JPEG
 * engine (FPREP_JPEG_THREADS). Measured on an H100 (1080p q90, 640x640
 * f32): 1 thread taking one frame a call 950 frames/s; 2 threads taking
 * every queued frame after a 500 us gather 2,450-3,450 (mean batch
 * 2.3-2.8, with 16 slots for JPEG frames). */
#define CUDA_GATHER_US       10000
#define CUDA_ENGINE_DECODERS 2

/* The longest the idle lane thread polls for a decoder's hand-back
 * (fprep__cuda_decoder_decoded_wait). */
#define CUDA_DECODED_POLL_NS (10u * 1000u * 1000u)

void fprep__cuda_decoder_decoded_wait(cuda_backend *cb)
{
	if (!decoder_poll_kicks(cb, &cb->lane_kicks, CUDA_DECODED_POLL_NS))
		fprep__cuda_wait_spin(cb, &cb->cv_lane, &cb->lane_kicks, 0);
}

/* decoder_helper_take: a CPU helper (a lane with the engine) takes the head
 * slot of decode_q into ss[0] when decoder_helped says so. Returns 1 or 0.
 * With cb->mu held. */
static unsigned decoder_helper_take(cuda_backend *cb, cuda_slot **ss)
{
	if (!decoder_helped(cb))
		return 0;
	fprep__jpeg_turn turn;

	ss[0] = fprep__container_of(fprep__jpeg_turns_pop(&cb->decode_q, &turn),
	                            cuda_slot, link);
	ss[0]->turn = turn;
	ss[0]->decode_us = 0;
	return 1;
}

/* decoder_room: how many frames decoder d takes now, its batch
 * holding up to cap: while the engine is busy and CPU helpers idle, a
 * batch of help_min frames leaves the rest of the queue to the helpers
 * (decoder_helped), so that they decode what the engine's next batch would
 * not. With cb->mu held. */
static unsigned decoder_room(const cuda_backend *cb, const cuda_decoder *d,
                             unsigned cap)
{
	unsigned have = d->n + d->nc;

	if (d->nvjd != NULL && cb->helpers_idle > 0 &&
	    cb->engine_calls >= cb->calls_max && have >= cb->help_min)
		return 0;
	return cap - have;
}

/* decoder_gathers tells whether decoder d, its batch not empty and
 * nothing more to take now, waits for more rather than decode it: with
 * frames for the engine, while calls_max decoders are in it and the batch
 * is not full, for gather_ns at most since its first frame (so an idle
 * engine is called at once: a lone frame never waits). With cb->mu
 * held. */
static int decoder_gathers(const cuda_backend *cb, const cuda_decoder *d)
{
	return d->nvjd != NULL && d->n > 0 && d->n + d->nc < cb->jpeg_batch &&
	       cb->engine_calls >= cb->calls_max && !cb->decoders_stop &&
	       cuda_core_now_ns() - d->first_ns < cb->gather_ns;
}

static unsigned decoder_env_uint(const char *name, unsigned lo, unsigned hi,
                                 unsigned def);

/* decoder_warm runs d's engine once at each batch size it calls it
 * with (decoder_batch_size: 1..8, then multiples of 8 up to the lane's
 * batch) on a grainy 1920x1080 JPEG of about 1 MB (4:2:0, RGB out:
 * fprep__jpeg_encode_test; a smooth 100 kB file left one 123 ms call to
 * a bench's first second, buffers growing for the photographs' larger
 * bitstreams), before the decoder takes
 * frames. nvJPEG makes a state's buffers on its first decode at a batch
 * size: one such call took 235 ms on the H200 (INFO jpeg_timing_max
 * call_us), a stall every frame in flight waited out (c=16: p99.9 156 ms,
 * max 238 ms against a p50 of 5.7 ms). Frames of a larger size or
 * another channel order still pay for theirs once. FPREP_NVJPEG_WARM=0
 * skips it. A decoder's thread, before its loop, while
 * fprep__cuda_decoder_setup waits (the daemon does not listen yet): about 3.4 s
 * on the H200. */
static void decoder_warm(cuda_backend *cb, cuda_decoder *d)
{
	const unsigned w = 1920, h = 1080;
	const size_t frame = (size_t)w * h * 3;
	fprep__nvjpeg_item it[FPREP__NVJPEG_BATCH_MAX];
	char msg[FPREP_MESSAGE_SIZE];
	uint64_t t = cuda_core_now_ns();
	unsigned sizes = 0, top = 0;
	uint8_t *jpg, *dev = NULL;
	size_t len;

	if (!decoder_env_uint("FPREP_NVJPEG_WARM", 0, 1, 1) ||
	    fprep__jpeg_encode_test(w, h, &jpg, &len) != 0)
		return;
	if (FPREP__CUDA(NULL,
	                cudaMalloc((void **)&dev, frame * cb->jpeg_batch))) {
		fprep__jpeg_free(jpg);
		return;
	}
	for (unsigned k = 1; k <= cb->jpeg_batch; k++) {
		if (decoder_batch_size(k) != k)
			continue;
		for (unsigned i = 0; i < k; i++)
			it[i] = (fprep__nvjpeg_item){jpg, len, dev + i * frame,
			                             (size_t)w * 3};
		if (fprep__nvjpeg_decode(d->nvjd, it, k, 0, 0, d->stream, msg,
		                         sizeof msg) != 0 ||
		    FPREP__CUDA(NULL, cudaStreamSynchronize(d->stream))) {
			fprep__log(FPREP_LOG_WARNING,
			           "GPU %d JPEG decoder: warm-up stopped at a "
			           "batch of %u: %s",
			           cb->device, k, msg);
			break;
		}
		sizes++;
		top = k;
	}
	(void)FPREP__CUDA(NULL, cudaFree(dev));
	fprep__jpeg_free(jpg);
	fprep__log(FPREP_LOG_INFO,
	           "GPU %d JPEG decoder: engine warmed up at %u batch sizes "
	           "(1 to %u frames of %ux%u) in %.0f ms",
	           cb->device, sizes, top, w, h,
	           (double)(cuda_core_now_ns() - t) / 1e6);
}

/* decoder_main: a decoder. A decoder with the engine gathers a
 * batch: it takes the frames queued (up to jpeg_batch) and checks their
 * headers (decoder_check), and while the engine is busy
 * (decoder_gathers) waits for more and checks them as they come, so
 * that its host work overlaps the engine's; then it decodes the batch
 * (decoder_finish) and hands every slot back to the lane or answers
 * it. nvJPEG runs one batched call at a time and only a batch spreads
 * over the engine's cores: the frames that come during one batch make
 * the next. A decoder without the engine takes one frame at a time. Once
 * done it may poll for the next (decoder_poll) before it sleeps. A
 * CPU helper (past the engine decoders) takes one frame at a time while
 * the engine is busy and the queue long (decoder_helper_take) and decodes it
 * with libjpeg-turbo. */
static void *decoder_main(void *arg)
{
	cuda_backend *cb = arg;
	cuda_decoder d;
	cuda_slot *ss[FPREP__NVJPEG_BATCH_MAX];
	unsigned idx = atomic_fetch_add(&cb->decoder_seq, 1);
	int helper = idx >= cb->engine_decoders;
	int may_poll = 0;

	fprep__cuda_core_thread_start(helper ? "fp-jpeg-cpu" : "fp-jpeg-gpu",
	                              cb->device);
	decoder_open(cb, &d, !helper);
	if (d.nvjd != NULL)
		decoder_warm(cb, &d);
	unsigned cap = d.nvjd != NULL ? cb->jpeg_batch : 1;
	pthread_mutex_lock(&cb->mu);
	cb->ready++; /* fprep__cuda_decoder_setup waits for every decoder */
	pthread_cond_broadcast(&cb->cv_decode);
	for (;;) {
		unsigned have = d.n + d.nc, m;

		m = helper ? (have == 0 ? decoder_helper_take(cb, ss) : 0)
		           : decoder_take(cb, &d, ss,
		                          decoder_room(cb, &d, cap));
		if (m > 0) {
			/* A frame alone: nothing else in the lane (INFO
			 * jpeg_timing_lone: what a request at c=1 spends
			 * where). */
			ss[0]->lone = have == 0 && m == 1 &&
			              fprep__cuda_core_busy(cb) == 1 &&
			              !cuda_core_jobs_waiting(cb);
			if (have == 0) {
				d.order = ss[0]->job->req.channel_order;
				d.first_ns = cuda_core_now_ns();
			}
			if (d.nvjd != NULL) {
				d.taken += m;
				cb->gathered += m;
			}
			/* More than this batch holds: another decoder. */
			if (!helper && have + m == cap &&
			    decoder_queued(cb) > 0)
				pthread_cond_signal(&cb->cv_decode);
			pthread_mutex_unlock(&cb->mu);
			uint64_t now = cuda_core_now_ns();
			for (unsigned i = 0; i < m; i++) {
				CUDA_JSTAT(cb, ss[i], queue_ns,
				           now - ss[i]->job->t_start_ns);
				CUDA_JSTAT(cb, ss[i], frames, 1);
			}
			decoder_check(cb, &d, ss, m);
			pthread_mutex_lock(&cb->mu);
			if (d.n + d.nc == 0) { /* every frame refused */
				cb->gathered -= d.taken;
				d.taken = 0;
			}
			continue;
		}
		if (d.n + d.nc > 0 && decoder_gathers(cb, &d)) {
			/* What this batch leaves queued (decoder_room)
			 * is the helpers'. */
			if (decoder_helped(cb))
				pthread_cond_signal(&cb->cv_help);
			cuda_core_timedwait(&cb->cv_decode, &cb->mu,
			                    d.first_ns + cb->gather_ns);
			continue;
		}
		if (d.n + d.nc > 0) {
			/* In the engine until decoder_finish leaves. */
			int engaged = d.n > 0;
			cuda_slot *first = d.n > 0 ? d.eng[0] : d.cpu[0];

			cb->engine_calls += (unsigned)engaged;
			cb->gathered -= d.taken;
			d.taken = 0;
			may_poll = !helper;
			pthread_mutex_unlock(&cb->mu);
			CUDA_JSTAT(cb, first, gather_ns,
			           cuda_core_now_ns() - d.first_ns);
			decoder_finish(cb, &d, engaged);
			pthread_mutex_lock(&cb->mu);
			continue;
		}
		if (cb->decoders_stop)
			break;
		if (helper) {
			cb->helpers_idle++;
			pthread_cond_wait(&cb->cv_help, &cb->mu);
			cb->helpers_idle--;
		} else if (may_poll && cb->spin_ns > 0 && !cb->decoder_polling)
			decoder_poll(cb);
		else
			pthread_cond_wait(&cb->cv_decode, &cb->mu);
		may_poll = 0;
	}
	pthread_mutex_unlock(&cb->mu);
	decoder_close(&d);
	return NULL;
}

/* decoder_env_uint reads the environment variable name as a number from lo
 * to hi: dflt when unset or empty, or (with a warning) not such a
 * number. */
static unsigned decoder_env_uint(const char *name, unsigned lo, unsigned hi,
                                 unsigned dflt)
{
	const char *env = getenv(name);
	char *end;
	unsigned long v;

	if (env == NULL || env[0] == '\0')
		return dflt;
	v = strtoul(env, &end, 10);
	if (*end == '\0' && env[0] != '-' && v >= lo && v <= hi)
		return (unsigned)v;
	fprep__log(FPREP_LOG_WARNING, "%s=%s ignored (%u to %u)", name, env, lo,
	           hi);
	return dflt;
}

unsigned fprep__cuda_decoder_plan(cuda_backend *cb, int engine, long ncpu,
                                  unsigned *threads, char *why, size_t why_size)
{
	const char *gate = getenv("FPREP_NVJPEG_GATE");
	long half = ncpu / 2;
	unsigned n, helpers = 0, slots;

	if (!engine) {
		snprintf(why, why_size,
		         "the JPEG engine is off (--jpeg-engine=false)");
		cb->nvjpeg = NULL;
	} else if (fprep__nvjpeg_open(&cb->nvjpeg, why, why_size) != 0)
		cb->nvjpeg = NULL;
	n = cb->nvjpeg != NULL ? CUDA_ENGINE_DECODERS
	    : half < 1         ? 1
	    : half > 8         ? 8
	                       : (unsigned)half;
	n = decoder_env_uint("FPREP_JPEG_THREADS", 1, 64, n);
	cb->jpeg_batch = decoder_env_uint("FPREP_NVJPEG_BATCH", 1,
	                                  FPREP__NVJPEG_BATCH_MAX,
	                                  FPREP__NVJPEG_BATCH_MAX);
	cb->calls_max = decoder_env_uint("FPREP_NVJPEG_CALLS", 1, 64, 1);
	cb->gather_ns = (uint64_t)decoder_env_uint("FPREP_NVJPEG_GATHER_US", 0,
	                                           1000000, CUDA_GATHER_US) *
	                1000u;
	cb->gate_done = gate == NULL || strcmp(gate, "call") != 0;
	if (cb->nvjpeg != NULL)
		helpers = decoder_env_uint("FPREP_JPEG_CPU_HELPERS", 0, 64, 0);
	cb->help_min = decoder_env_uint("FPREP_JPEG_HELP_MIN", 0, 4096,
	                                cb->jpeg_batch / 2);
	cb->engine_decoders = n;
	cb->helpers = helpers;
	slots = cb->nvjpeg != NULL
	                ? n * cb->jpeg_batch + cb->jpeg_batch / 2 + 2 * helpers
	                : 2 * n;
	*threads = n + helpers;
	return decoder_env_uint("FPREP_JPEG_SLOTS", 1, 4096, slots);
}

void fprep__cuda_decoder_setup(cuda_backend *cb, unsigned lane, unsigned want,
                               char *why, size_t why_size)
{
	unsigned jslots = cb->nslots - cb->raw_slots;

	cb->decoders = calloc(want, sizeof *cb->decoders);
	while (cb->decoders != NULL && cb->ndecoders < want &&
	       pthread_create(&cb->decoders[cb->ndecoders], NULL, decoder_main,
	                      cb) == 0)
		cb->ndecoders++;
	if (cb->nvjpeg != NULL && cb->ndecoders == 0) {
		fprep__nvjpeg_close(cb->nvjpeg);
		cb->nvjpeg = NULL;
		snprintf(why, why_size, "no decoder thread started");
	}
	/* The daemon listens once every decoder is set up and its engine
	 * warmed up (decoder_warm), so that no frame waits for that. */
	pthread_mutex_lock(&cb->mu);
	while (cb->ready < cb->ndecoders)
		pthread_cond_wait(&cb->cv_decode, &cb->mu);
	pthread_mutex_unlock(&cb->mu);
	if (cb->nvjpeg != NULL)
		snprintf(
		        cb->jpeg_desc, sizeof cb->jpeg_desc,
		        "%s, batches of up to %u (gathered while %u call%s in "
		        "the engine%s, up to %llu us) from %u decoder threads, "
		        "%u CPU helpers (beyond %u queued); %u slots for JPEG "
		        "frames; libjpeg-turbo for what the engine does not "
		        "take",
		        fprep__nvjpeg_describe(cb->nvjpeg), cb->jpeg_batch,
		        cb->calls_max, cb->calls_max == 1 ? " is" : "s are",
		        cb->gate_done ? " until decoded" : "",
		        (unsigned long long)(cb->gather_ns / 1000u),
		        cb->ndecoders < cb->engine_decoders
		                ? cb->ndecoders
		                : cb->engine_decoders,
		        cb->ndecoders > cb->engine_decoders
		                ? cb->ndecoders - cb->engine_decoders
		                : 0,
		        cb->help_min, jslots);
	else if (cb->ndecoders > 0)
		snprintf(cb->jpeg_desc, sizeof cb->jpeg_desc,
		         "libjpeg-turbo on %u CPU threads, %u slots for JPEG "
		         "frames (%.150s)",
		         cb->ndecoders, jslots, why);
	else
		snprintf(cb->jpeg_desc, sizeof cb->jpeg_desc,
		         "libjpeg-turbo on the lane thread (%.150s)", why);
	fprep__log(FPREP_LOG_INFO, "GPU lane %u: JPEG frames: %s", lane,
	           cb->jpeg_desc);
}

void fprep__cuda_decoder_text(cuda_jpeg_stats *j, char *buf, size_t size)
{
	unsigned long long f = atomic_load(&j->frames),
	                   bt = atomic_load(&j->batches),
	                   bf = atomic_load(&j->batch_frames),
	                   c = atomic_load(&j->cpu_frames),
	                   bk = atomic_load(&j->back),
	                   dn = atomic_load(&j->done);
#define PER(ns, k) ((k) ? (double)atomic_load(&(ns)) / 1e3 / (double)(k) : 0.0)
	snprintf(buf, size,
	         "frames=%llu queue_us=%.1f parse_us=%.1f batches=%llu "
	         "mean_batch=%.2f gather_us=%.1f call_us=%.1f "
	         "call_us_per_frame=%.1f sync_us=%.1f cpu_frames=%llu "
	         "cpu_us=%.1f back=%llu back_us=%.1f lane_us=%.1f "
	         "total_us=%.1f",
	         f, PER(j->queue_ns, f), PER(j->parse_ns, f), bt,
	         bt ? (double)bf / (double)bt : 0.0, PER(j->gather_ns, bt),
	         PER(j->call_ns, bt), PER(j->call_ns, bf), PER(j->sync_ns, bt),
	         c, PER(j->cpu_ns, c), bk, PER(j->back_ns, bk),
	         PER(j->lane_ns, dn), PER(j->total_ns, dn));
#undef PER
}

void fprep__cuda_decoder_max_text(cuda_jpeg_stats *j, char *buf, size_t size)
{
#define MAX(ns) ((double)atomic_load(&(ns)) / 1e3)
	snprintf(buf, size,
	         "queue_us=%.0f parse_us=%.0f batch=%llu gather_us=%.0f "
	         "call_us=%.0f sync_us=%.0f cpu_us=%.0f back_us=%.0f "
	         "lane_us=%.0f total_us=%.0f",
	         MAX(j->queue_ns), MAX(j->parse_ns),
	         (unsigned long long)atomic_load(&j->batch_frames),
	         MAX(j->gather_ns), MAX(j->call_ns), MAX(j->sync_ns),
	         MAX(j->cpu_ns), MAX(j->back_ns), MAX(j->lane_ns),
	         MAX(j->total_ns));
#undef MAX
}

void fprep__cuda_decoder_stop(cuda_backend *cb)
{
	pthread_mutex_lock(&cb->mu);
	cb->decoders_stop = 1;
	pthread_cond_broadcast(&cb->cv_decode);
	pthread_cond_broadcast(&cb->cv_help);
	pthread_mutex_unlock(&cb->mu);
	for (unsigned i = 0; i < cb->ndecoders; i++)
		pthread_join(cb->decoders[i], NULL);
	cb->ndecoders = 0;
	free(cb->decoders);
	cb->decoders = NULL;
}
