/*
 * cuda_lane.c: the lane thread of a GPU lane (backend_cuda.c).
 *
 * The lane thread runs region operations first, then the JPEG frames the
 * decoders handed back (decoded), then the jobs submitted: sorted from
 * pending into slot_q (JPEG frames for the decoders, by turns of their
 * clients) or waiting (the rest, in arrival order), the oldest taken as
 * soon as a staging slot of its kind is free (lane_take) and enqueued on
 * it (lane_run); an ECHO, or any job once the lane failed or its drain
 * deadline passed, is answered at once. A video stream's jobs never come
 * here: their sessions run them on their own threads (cuda_video.c).
 */
#include "gpu/cuda_core_internal.h"

/* lane_free_slot returns a free slot for a job, NULL when none: for a
 * JPEG frame one of the slots kept for those first, then any. With cb->mu
 * held. */
static cuda_slot *lane_free_slot(cuda_backend *cb, int jpeg)
{
	if (jpeg)
		for (unsigned i = cb->raw_slots; i < cb->nslots; i++)
			if (cb->slots[i].job == NULL)
				return &cb->slots[i];
	for (unsigned i = 0; i < cb->raw_slots; i++)
		if (cb->slots[i].job == NULL)
			return &cb->slots[i];
	return NULL;
}

static int lane_all_free(const cuda_backend *cb)
{
	for (unsigned i = 0; i < cb->nslots; i++)
		if (cb->slots[i].job != NULL)
			return 0;
	return 1;
}

/* lane_slot_wake: when the lane thread waiting for a free slot ends its
 * paced sleep: as the next completion, which frees one, is expected (the
 * completion thread polls from a little earlier); 0: no sleep. */
static uint64_t lane_slot_wake(cuda_pace *p)
{
	return fprep__cuda_wait_pace_wake(p, cuda_core_pace_load(&p->next_ns),
	                                  0, cuda_core_now_ns());
}

/* lane_is_jpeg: a frame job with a JPEG source that the lane's decoders
 * take (one in a CUDA region goes to fprep__cuda_slot_enqueue, which refuses
 * it). */
static int lane_is_jpeg(const fprep__job *job)
{
	return job->req.kind == FPREP_KIND_FRAME &&
	       job->req.src_format == FPREP_PIX_JPEG && !job->input_device;
}

/* lane_before tells whether job node a was sorted (submitted) before job
 * node b. */
static int lane_before(const fprep__qnode *a, const fprep__qnode *b)
{
	return fprep__container_of(a, fprep__job, link)->seq <
	       fprep__container_of(b, fprep__job, link)->seq;
}

/* lane_sort moves the jobs submitted since the last call from pending, in
 * their order, to slot_q (JPEG frames for the decoders) or waiting, each
 * numbered (job->seq). Lane thread, with cb->mu held. */
static void lane_sort(cuda_backend *cb)
{
	fprep__qnode *n;

	while ((n = fprep__queue_pop(&cb->pending)) != NULL) {
		fprep__job *job = fprep__container_of(n, fprep__job, link);

		job->seq = cb->seq++;
		if (lane_is_jpeg(job) && cb->ndecoders > 0)
			fprep__jpeg_turns_push(&cb->slot_q, n, job->uid,
			                       job->conn);
		else
			fprep__queue_push(&cb->waiting, n);
	}
}

/* lane_take removes the job the lane runs next from slot_q or waiting and
 * returns it, with a free slot for it in *sp (NULL: it needs none, an ECHO,
 * or any job when now is set, as it is answered at once) and *jpeg set
 * for a JPEG frame of slot_q (*turn its turn there); NULL when none can
 * run now. The oldest job goes first, a JPEG frame being the one whose
 * turn it is; when no slot of its kind is free, one of the other kind.
 * Lane thread, with cb->mu held. */
static fprep__job *lane_take(cuda_backend *cb, int now, cuda_slot **sp,
                             int *jpeg, fprep__jpeg_turn *turn)
{
	const fprep__qnode *oldest =
	        fprep__jpeg_turns_oldest(&cb->slot_q, lane_before);
	fprep__qnode *raw = cb->waiting.head;
	int first = oldest != NULL && (raw == NULL || lane_before(oldest, raw));

	for (int k = 0; k < 2; k++) {
		int is_jpeg = k == 0 ? first : !first;
		fprep__qnode *n =
		        is_jpeg ? fprep__jpeg_turns_peek(&cb->slot_q) : raw;
		fprep__job *job;
		cuda_slot *s = NULL;

		if (n == NULL)
			continue;
		job = fprep__container_of(n, fprep__job, link);
		if (!now && job->req.kind != FPREP_KIND_ECHO &&
		    (s = lane_free_slot(cb, is_jpeg)) == NULL)
			continue;
		if (is_jpeg)
			(void)fprep__jpeg_turns_pop(&cb->slot_q, turn);
		else
			(void)fprep__queue_pop(&cb->waiting);
		*sp = s;
		*jpeg = is_jpeg;
		return job;
	}
	return NULL;
}

/* lane_run puts job's work on the streams with slot s
 * (fprep__cuda_slot_enqueue), busy being the other slots in use, and hands s to
 * the completion thread, or completes it itself when it is alone
 * (fprep__cuda_wait_lane_finish); a job refused is answered at once. Lane
 * thread, cb->mu not held. */
static void lane_run(cuda_backend *cb, cuda_slot *s, fprep__job *job,
                     unsigned busy)
{
	if (fprep__cuda_slot_enqueue(
	            cb, s, job, fprep__cuda_slot_use_mapped(cb, busy),
	            cb->transfer == FPREP__CUDA_STAGED && busy == 0) != 0) {
		fprep__cuda_wait_deliver(cb, s, job);
		return;
	}
	s->t_enq_ns = cuda_core_now_ns();
	pthread_mutex_lock(&cb->mu);
	int alone = busy == 0 && cb->spin_ns > 0 &&
	            !cuda_core_jobs_waiting(cb) &&
	            fprep__queue_empty(&cb->flying);
	unsigned k =
	        atomic_load_explicit(&cb->lane_kicks, memory_order_relaxed);
	if (!alone) {
		fprep__queue_push(&cb->flying, &s->link);
		cuda_core_kick(&cb->cv_done, &cb->done_kicks);
	}
	pthread_mutex_unlock(&cb->mu);
	if (alone)
		fprep__cuda_wait_lane_finish(cb, s, k);
}

/* lane_decoded takes a slot from the decoded queue (a JPEG frame the
 * decoders left on the device or in it) and enqueues its job, or fails it
 * when the lane failed or its drain deadline passed. Lane thread, with
 * cb->mu held (let go meanwhile). */
static void lane_decoded(cuda_backend *cb)
{
	cuda_slot *s = fprep__container_of(fprep__queue_pop(&cb->decoded),
	                                   cuda_slot, link);
	unsigned busy = fprep__cuda_core_busy(cb) - 1;
	uint64_t now = cuda_core_now_ns();
	int late = cb->stopping && now >= cb->deadline_ns;
	int fatal = cb->fatal;

	pthread_mutex_unlock(&cb->mu);
	CUDA_JSTAT(cb, s, back, 1);
	CUDA_JSTAT(cb, s, back_ns, now - s->t_back_ns);
	if (fatal)
		cuda_core_fail(s->job, FPREP_ECUDA, 1,
		               "the GPU lane failed earlier (sticky error)");
	else if (late)
		cuda_core_fail(s->job, FPREP_ESHUTDOWN, 0,
		               "GPU lane closing: drain deadline passed");
	if (fatal || late)
		fprep__cuda_wait_deliver(cb, s, s->job);
	else
		lane_run(cb, s, s->job, busy);
	pthread_mutex_lock(&cb->mu);
}

void *fprep__cuda_lane_main(void *arg)
{
	cuda_backend *cb = arg;
	fprep__gpu_status st = {0};
	int dev_ok = !FPREP__CUDA(&st, cudaSetDevice(cb->device));

	fprep__cuda_core_thread_start("fp-lane-gpu", cb->device);

	pthread_mutex_lock(&cb->mu);
	for (;;) {
		fprep__job *job;
		fprep__jpeg_turn turn = {0};
		cuda_slot *s = NULL;
		int jpeg = 0;

		if (!fprep__queue_empty(&cb->admin)) {
			fprep__cuda_region_drain(cb, dev_ok);
			continue;
		}
		if (!fprep__queue_empty(&cb->decoded)) {
			lane_decoded(cb);
			continue;
		}
		lane_sort(cb);
		int late =
		        cb->stopping && cuda_core_now_ns() >= cb->deadline_ns;
		int now = !dev_ok || cb->fatal || late;
		if (!cuda_core_jobs_waiting(cb)) {
			if (cb->stopping && cb->decoding == 0)
				break;
			if (cb->trace && dev_ok && !cb->fatal &&
			    cuda_core_now_ns() - cb->anchor_ns >
			            CUDA_ANCHOR_NS &&
			    lane_all_free(cb)) {
				pthread_mutex_unlock(&cb->mu);
				fprep__cuda_wait_anchor(cb);
				pthread_mutex_lock(&cb->mu);
				continue;
			}
			if (cb->decoding > 0 && cb->spin_ns > 0)
				fprep__cuda_decoder_decoded_wait(cb);
			else
				fprep__cuda_wait_spin(cb, &cb->cv_lane,
				                      &cb->lane_kicks, 0);
			continue;
		}
		job = lane_take(cb, now, &s, &jpeg, &turn);
		if (job == NULL) {
			if (cb->stopping)
				cuda_core_timedwait(&cb->cv_lane, &cb->mu,
				                    cb->deadline_ns);
			else /* a slot frees at the next completion */
				fprep__cuda_wait_spin(
				        cb, &cb->cv_lane, &cb->lane_kicks,
				        lane_slot_wake(&cb->pace));
			continue;
		}
		unsigned busy = 0;
		for (unsigned i = 0; i < cb->nslots; i++)
			busy += cb->slots[i].job != NULL;
		if (s != NULL) {
			s->job = job;
			s->slot_turn = turn;
		} else if (jpeg) { /* answered at once: no decode to charge */
			fprep__jpeg_turns_charge(&cb->slot_q, &turn, 0);
		}
		int fatal = cb->fatal;
		pthread_mutex_unlock(&cb->mu);

		job->t_start_ns = cuda_core_now_ns();
		job->status = FPREP_OK;
		job->fatal = 0;
		job->message[0] = '\0';
		if (!dev_ok) {
			cuda_core_fail(job, FPREP_ECUDA, 1, st.text);
			fprep__cuda_wait_deliver(cb, NULL, job);
		} else if (fatal) {
			cuda_core_fail(
			        job, FPREP_ECUDA, 1,
			        "the GPU lane failed earlier (sticky error)");
			fprep__cuda_wait_deliver(cb, NULL, job);
		} else if (late) {
			cuda_core_fail(
			        job, FPREP_ESHUTDOWN, 0,
			        "GPU lane closing: drain deadline passed");
			fprep__cuda_wait_deliver(cb, NULL, job);
		} else if (s == NULL) { /* ECHO: no work, no copies */
			fprep__cuda_wait_deliver(cb, NULL, job);
		} else if (jpeg) {
			fprep__cuda_decoder_start(cb, s);
		} else {
			lane_run(cb, s, job, busy);
		}
		pthread_mutex_lock(&cb->mu);
	}
	cb->lane_exited = 1;
	cuda_core_kick(&cb->cv_done, &cb->done_kicks);
	pthread_mutex_unlock(&cb->mu);
	return NULL;
}
