/*
 * bench_run.h: one run of frameprep-bench's load (a point of a sweep, or
 * its ECHO ceiling): the stream threads, each with its connection, the
 * open loop's arrival schedule, the verifier thread that compares sampled
 * replies with the CPU reference, and the watcher that prints progress.
 */
#ifndef FRAMEPREP_BENCH_RUN_H
#define FRAMEPREP_BENCH_RUN_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "bench_input.h"
#include "bench_options.h"
#include "bench_report.h"
#include "bench_trace.h"
#include "frameprep/frameprep.h"

/* bench_conn: one connection of the pool and, with --shm, its
 * shared-memory region: the frame slot at offset 0 (holding the input last
 * written there) and two tensor slots, out_capacity bytes each; requests
 * use the one at out_offset while the verifier may hold the other
 * (bench_verifier). */
typedef struct bench_conn {
	fprep_client *client;
	fprep_region *region;
	const bench_input *staged;
	uint64_t out_offset;
	uint64_t out_slots[2]; /* the tensor slots' offsets */
	uint64_t out_capacity; /* a tensor slot, and the reply after it */
	/* --cuda-out: the tensor's slot in device memory, registered as a
	 * CUDA region, and the host copy a sampled tensor is compared on
	 * (out_capacity bytes each; out_offset 0). */
	fprep_region *cuda_region;
	void *cuda_dptr;
	void *cuda_host;
} bench_conn;

struct bench_verifier;

/* bench_run: what every thread of one run shares. */
typedef struct bench_run {
	const bench_opts *opts;
	bench_input *inputs;
	size_t ninputs;
	uint16_t kind;
	int open_loop;
	double rate;
	unsigned streams;
	double duration_s; /* 0: run until requests measured requests */
	uint64_t requests;
	double warmup_s;
	uint64_t start_ns;
	uint64_t warm_end_ns;
	uint64_t end_ns; /* duration mode */
	atomic_uint_fast64_t next_input;
	atomic_uint_fast64_t measured_issued; /* closed loop, requests mode */
	atomic_uint_fast64_t progress_ok;
	atomic_uint_fast64_t progress_fail;
	atomic_uint_fast64_t messages;
	atomic_int stop;
	/* Open-loop arrival schedule, shared by the pool. */
	pthread_mutex_t gen_lock;
	uint64_t gen_next_ns;
	uint64_t gen_issued; /* measured arrivals handed out */
	uint64_t gen_rng;
	int gen_done;
	uint64_t gen_dropped;
	struct bench_verifier *verifier; /* --verify sample of FRAME requests */
} bench_run;

/* bench_interrupted: set by SIGINT's handler; the runs stop early. */
extern volatile sig_atomic_t bench_interrupted;

/* bench_now_ns returns CLOCK_MONOTONIC in nanoseconds. */
uint64_t bench_now_ns(void);

/* bench_sleep_until sleeps until CLOCK_MONOTONIC reads ns nanoseconds
 * (at once when it has passed). */
void bench_sleep_until(uint64_t ns);

/* bench_run_exec runs one load described by run (its configuration fields
 * set) on conns[0..run->streams) and merges the streams' results into
 * *out. Returns 0, or -1 if threads could not be started. */
int bench_run_exec(bench_run *run, bench_conn *conns, const char *label,
                   bench_result *out, bench_trace *trace);

#endif /* FRAMEPREP_BENCH_RUN_H */
