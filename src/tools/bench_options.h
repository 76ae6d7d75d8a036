/*
 * bench_options.h: frameprep-bench's command line. One table of options
 * (bench_options.c) gives each its name, the kind of its value, its range,
 * its default and its help text; parsing, the range errors and --help all
 * come from it, as frameprepd's settings come from config.c's table. The
 * preprocessing options the CLI shares (tool_options.h) are spliced in.
 */
#ifndef FRAMEPREP_BENCH_OPTIONS_H
#define FRAMEPREP_BENCH_OPTIONS_H

#include <stdint.h>
#include <stdio.h>

#include "bench_input.h"
#include "tool_options.h"

#define BENCH_MAX_POINTS  64
#define BENCH_MAX_STREAMS 4096
/* Packets a --video stream keeps in flight at most (--window). */
#define BENCH_MAX_WINDOW 64

enum bench_verify { BENCH_VERIFY_NONE, BENCH_VERIFY_SAMPLE, BENCH_VERIFY_ALL };
enum bench_arrivals { BENCH_ARRIVALS_CONSTANT, BENCH_ARRIVALS_POISSON };

/* bench_opts: the command line, as bench_options_parse leaves it. */
typedef struct bench_opts {
	const char *url;           /* urls, or NULL: the default URL */
	char urls[TOOL_URLS_SIZE]; /* the --socket URLs, comma-separated */
	const char *trust_owner;   /* --trust-socket-owner, or NULL */
	unsigned conc[BENCH_MAX_POINTS];
	unsigned nconc;
	double rates[BENCH_MAX_POINTS];
	unsigned nrates;
	int arrivals; /* enum bench_arrivals */
	double duration_s;
	uint64_t requests;
	double warmup_s;
	int echo;
	int shm;          /* --shm's word: bit 0 in, bit 1 out */
	int shm_in;       /* frames through the stream's shared-memory region */
	int shm_out;      /* tensors written into it */
	int shm_reply;    /* replies read from it too (FPREP_LOC_F_SHM_REPLY) */
	unsigned spin_us; /* fprep_client_set_spin, with shm_reply */
	int no_stage;     /* fprep_client_set_staging(client, 0) */
	int no_doorbell;  /* fprep_client_doorbell(client, 0) */
	int doorbell;     /* requests through a doorbell (shm both) */
	int cuda_out;     /* tensors into device memory (CUDA regions) */
	int verify;       /* enum bench_verify */
	unsigned verify_every;
	int timeout_ms;
	int ceiling;
	double ceiling_s;
	double pcie_gbps;
	const char *json;
	const char *csv;
	const char *plot;
	int quiet;
	int trace;         /* tabulate the daemon's --trace stage times */
	unsigned rois;     /* --rois N: ROIS requests of N boxes */
	unsigned batch;    /* --batch N: BATCH requests of N frames */
	unsigned source;   /* how many of --image, --image-dir, --synthetic */
	const char *video; /* --video FILE: the video mode, or NULL */
	unsigned video_streams; /* --streams N: its producers */
	int video_realtime;     /* --realtime: each at the file's frame rate */
	unsigned video_window;  /* --window N: packets in flight per stream */
	bench_frame_spec spec;
} bench_opts;

/* bench_options_parse fills *o from argv (argc entries), defaults first.
 * Returns 0 to run, -1 to exit 0 (--help and --version, printed on
 * stdout), or 2 on a usage error, said on stderr: the option, its value
 * and what it takes. */
int bench_options_parse(int argc, char **argv, bench_opts *o);

/* bench_options_usage prints --help's text to f. */
void bench_options_usage(FILE *f);

#endif /* FRAMEPREP_BENCH_OPTIONS_H */
