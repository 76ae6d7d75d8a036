/*
 * frameprep-bench: load generator and checker for frameprepd.
 *
 * The design is simple: every stream is a thread with its own connection
 * (fprep_client), sending FRAME requests built once from decoded or
 * synthetic frames, timing each reply and checking it (status, shape, dtype,
 * size, and for a sample the content against fprep_preprocess_cpu). A
 * closed loop keeps N requests in flight; an open loop sends at a given
 * rate from a pool of N connections and measures latency from the intended
 * send time, so a stalled server is charged for the requests it held up
 * (no coordinated omission). Each thread records into its own histogram;
 * they are merged after the run. Before each measured point the same load
 * is run with ECHO requests to measure the transport ceiling.
 *
 * This file is main: it connects, asks the daemon what it runs, sets up
 * regions and doorbells, runs each point and writes the report. The
 * command line is bench_options.c's, a run's threads bench_run.c's, the
 * frames and their checks bench_input.c's, the report bench_report.c's.
 * Only the public API of libframeprep is used.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_cuda.h"
#include "bench_elements.h"
#include "bench_hist.h"
#include "bench_input.h"
#include "bench_options.h"
#include "bench_report.h"
#include "bench_run.h"
#include "bench_trace.h"
#include "bench_video.h"
#include "frameprep/frameprep.h"
#include "tool_options.h"

/* bench_info_value copies the value of "key: value" in the INFO text into
 * buf ("" when absent). */
static void bench_info_value(const char *text, const char *key, char *buf,
                             size_t size)
{
	size_t klen = strlen(key), n;
	const char *p = text, *end;

	buf[0] = 0;
	while (p && *p) {
		if (strncmp(p, key, klen) == 0 && p[klen] == ':') {
			p += klen + 1;
			while (*p == ' ' || *p == '\t')
				p++;
			end = strchr(p, '\n');
			n = end ? (size_t)(end - p) : strlen(p);
			if (n >= size)
				n = size - 1;
			memcpy(buf, p, n);
			buf[n] = 0;
			return;
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
}

/* bench_doorbell_requests reads the daemon's count of requests taken
 * from doorbells (INFO doorbell_requests); UINT64_MAX when unknown. */
static uint64_t bench_doorbell_requests(fprep_client *c)
{
	fprep_result res;
	char value[32] = "";
	uint64_t n = UINT64_MAX;

	if (fprep_client_info(c, &res) == FPREP_OK &&
	    res.header.status == FPREP_OK && res.payload != NULL) {
		bench_info_value((const char *)res.payload, "doorbell_requests",
		                 value, sizeof(value));
		if (value[0] != '\0')
			n = strtoull(value, NULL, 10);
	}
	fprep_result_fini(&res);
	return n;
}

/* bench_doorbell_report prints how many requests the daemon took from
 * doorbells since it counted db0 (what: which requests could go there),
 * or why that is unknown: no answer to INFO now (the daemon is gone), or
 * a count below db0 (another daemon answers: it restarted). */
static void bench_doorbell_report(fprep_client *c, uint64_t db0,
                                  const char *what)
{
	uint64_t db1 = bench_doorbell_requests(c);

	if (db1 == UINT64_MAX)
		printf("doorbell: requests taken by the daemon from doorbells "
		       "unknown (no INFO answer at the end: %s)\n",
		       fprep_client_last_error(c));
	else if (db1 < db0)
		printf("doorbell: requests taken by the daemon from doorbells "
		       "unknown (its count went from %" PRIu64 " to %" PRIu64
		       ": it restarted)\n",
		       db0, db1);
	else
		printf("doorbell: %" PRIu64 " requests taken by the daemon "
		       "from doorbells%s\n",
		       db1 - db0, what);
}

/* bench_refused says on stderr that what failed on client c with rc, and
 * the client's sentence; returns -1. */
static int bench_refused(const char *what, int rc, fprep_client *c)
{
	fprintf(stderr, "frameprep-bench: %s: %s (%s)\n", what,
	        fprep_strerror(rc), fprep_client_last_error(c));
	return -1;
}

/* bench_doorbells sets up each connection's doorbell (--doorbell) and
 * returns the daemon's count of requests taken from doorbells so far, or
 * UINT64_MAX after saying why it could not. */
static uint64_t bench_doorbells(bench_conn *conns, unsigned n)
{
	uint64_t taken;
	int rc;

	for (unsigned i = 0; i < n; i++) {
		rc = fprep_client_doorbell(conns[i].client, 1);
		if (rc != FPREP_OK) {
			bench_refused("--doorbell", rc, conns[i].client);
			return UINT64_MAX;
		}
	}
	taken = bench_doorbell_requests(conns[0].client);
	if (taken == UINT64_MAX)
		fprintf(stderr, "frameprep-bench: --doorbell: the daemon's "
		                "INFO has no doorbell_requests\n");
	return taken;
}

/* bench_open_regions gives each connection a shared-memory region with a
 * frame slot for the largest input and, page-aligned after it, two tensor
 * slots for the largest tensor (bench_conn). */
static int bench_open_regions(bench_conn *conns, unsigned n,
                              const bench_input *inputs, size_t ninputs)
{
	uint64_t in_max = 0, out_max = 0;
	unsigned i;
	size_t k;
	int rc;

	for (k = 0; k < ninputs; k++) {
		uint64_t in_k = inputs[k].els != NULL
		                        ? inputs[k].req.input_span
		                        : inputs[k].req.input_size;

		if (in_k > in_max)
			in_max = in_k;
		if (inputs[k].tensor_bytes > out_max)
			out_max = inputs[k].tensor_bytes;
	}
	in_max = (in_max + 4095) & ~(uint64_t)4095;
	/* The reply header (--shm-reply) follows the largest tensor, 8-byte
	 * aligned (protocol.h). */
	out_max = ((out_max + 7) & ~(uint64_t)7) + FPREP_REPLY_HEADER_SIZE;
	for (i = 0; i < n; i++) {
		rc = fprep_region_open(&conns[i].region, conns[i].client,
		                       (size_t)(in_max + 2 * out_max));
		if (rc)
			return bench_refused(
			        "--shm: cannot open a shared-memory "
			        "region",
			        rc, conns[i].client);
		conns[i].out_slots[0] = conns[i].out_offset = in_max;
		conns[i].out_slots[1] = in_max + out_max;
		conns[i].out_capacity = out_max;
	}
	return 0;
}

/* bench_open_cuda gives each connection, for --cuda-out, a tensor slot of
 * the largest tensor in device memory registered as a CUDA region, and a
 * host buffer its sampled tensors are copied into (bench_conn). Returns 0
 * or -1 (said). */
static int bench_open_cuda(bench_conn *conns, unsigned n,
                           const bench_input *inputs, size_t ninputs)
{
	uint64_t out_max = 0;
	char why[256];
	int rc;

	for (size_t k = 0; k < ninputs; k++)
		if (inputs[k].tensor_bytes > out_max)
			out_max = inputs[k].tensor_bytes;
	if (bench_cuda_open(0, why, sizeof(why))) {
		fprintf(stderr, "frameprep-bench: --cuda-out: %s\n", why);
		return -1;
	}
	for (unsigned i = 0; i < n; i++) {
		conns[i].cuda_dptr =
		        bench_cuda_alloc(out_max, why, sizeof(why));
		conns[i].cuda_host = malloc(out_max);
		if (conns[i].cuda_dptr == NULL || conns[i].cuda_host == NULL) {
			fprintf(stderr, "frameprep-bench: --cuda-out: %s\n",
			        conns[i].cuda_dptr ? "out of memory" : why);
			return -1;
		}
		rc = fprep_region_open_cuda(&conns[i].cuda_region,
		                            conns[i].client, conns[i].cuda_dptr,
		                            out_max);
		if (rc)
			return bench_refused(
			        "--cuda-out: cannot register a CUDA "
			        "region",
			        rc, conns[i].client);
		conns[i].out_offset = 0;
		conns[i].out_capacity = out_max;
	}
	return 0;
}

static void bench_on_sigint(int sig)
{
	(void)sig;
	bench_interrupted = 1;
}

/* bench_describe writes the input and tensor descriptions. */
static void bench_describe(const bench_opts *o, const bench_input *inputs,
                           size_t n, char *input, size_t isize, char *request,
                           size_t rsize)
{
	const fprep_request *t = &inputs[0].req;
	char fmt[64];

	if (o->spec.format >= FPREP_PIX_NV12 &&
	    o->spec.format != FPREP_PIX_JPEG)
		snprintf(fmt, sizeof(fmt), "%s %s %s",
		         tool_name(TOOL_FORMAT, o->spec.format),
		         t->yuv_matrix ? tool_name(TOOL_MATRIX, t->yuv_matrix)
		                       : "bt601",
		         t->yuv_range ? tool_name(TOOL_RANGE, t->yuv_range)
		                      : "limited");
	else
		snprintf(fmt, sizeof(fmt), "%s",
		         tool_name(TOOL_FORMAT, o->spec.format));

	if (o->spec.image_dir)
		snprintf(input, isize, "%zu images from %s, %s%s", n,
		         o->spec.image_dir, fmt,
		         o->spec.frame_w ? " resized" : "");
	else if (o->spec.image)
		snprintf(input, isize, "image %s, %ux%u %s", o->spec.image,
		         t->src_width, t->src_height, fmt);
	else
		snprintf(input, isize, "synthetic %ux%u %s, seed %llu",
		         t->src_width, t->src_height, fmt,
		         (unsigned long long)o->spec.seed);
	snprintf(
	        request, rsize,
	        "%s%s%ux%u %s %s %s %s, rounding %s, scale %g, mean "
	        "(%g,%g,%g), std (%g,%g,%g), pad %g, %llu bytes in, %llu bytes "
	        "out%s",
	        o->echo ? "ECHO " : "",
	        o->shm_in && o->shm_out    ? "shm in+out, "
	        : o->shm_in && o->cuda_out ? "shm in, CUDA out, "
	        : o->shm_in                ? "shm in, "
	        : o->shm_out               ? "shm out, "
	        : o->cuda_out              ? "CUDA out, "
	                                   : "",
	        t->out_width, t->out_height, tool_name(TOOL_RESIZE, t->resize),
	        tool_name(TOOL_ORDER, t->channel_order),
	        tool_name(TOOL_DTYPE, t->dtype),
	        tool_name(TOOL_LAYOUT, t->layout),
	        tool_rounding_name(t->rounding), t->scale, t->mean[0],
	        t->mean[1], t->mean[2], t->std[0], t->std[1], t->std[2],
	        t->pad_value, (unsigned long long)t->input_size,
	        (unsigned long long)inputs[0].tensor_bytes,
	        n > 1 ? " (first input)" : "");
}

/* bench_main: what main sets up, runs and tears down. */
typedef struct bench_main {
	bench_opts o;
	char url[TOOL_URLS_SIZE];
	bench_input *inputs;
	size_t ninputs;
	bench_conn *conns; /* nclients of them */
	unsigned nclients;
	bench_result *runs; /* npoints of them; the first done were run */
	unsigned npoints, done;
	char input_desc[512], request_desc[512];
	char backend[64], device[128], pid_text[32];
	char *info_text; /* the daemon's INFO text, or NULL */
	long daemon_pid; /* > 0: its CPU time is read (/proc) */
	bench_trace *trace;
	uint64_t ceiling_fail, fail;
	uint64_t db0; /* the daemon's doorbell count before the runs */
	int staged;   /* frames staged through the clients' doorbells */
	int trace_fail;
} bench_main;

/* bench_setup finds the URL, loads the inputs and describes them. Returns
 * 0, or 2 after saying why not. */
static int bench_setup(bench_main *m)
{
	bench_opts *o = &m->o;

	if (o->url) {
		snprintf(m->url, sizeof(m->url), "%s", o->url);
	} else if (fprep_default_url(m->url, sizeof(m->url))) {
		fprintf(stderr, "frameprep-bench: no default URL\n");
		return 2;
	}
	if (bench_inputs_load(&o->spec, &m->inputs, &m->ninputs))
		return 2;
	if (o->rois > 0 || o->batch > 0) {
		/* One request carries N elements; no ECHO of them (ceiling). */
		if (o->rois > 0 && o->batch > 0) {
			fprintf(stderr, "frameprep-bench: --rois or --batch, "
			                "not both\n");
			return 2;
		}
		if (o->echo || o->doorbell || o->shm_reply) {
			fprintf(stderr, "frameprep-bench: --rois and --batch "
			                "take no --echo, --doorbell or "
			                "--shm-reply\n");
			return 2;
		}
		o->ceiling = 0;
		if (bench_elements_setup(m->inputs, m->ninputs, o->rois,
		                         o->batch))
			return 2;
	}
	if (o->cuda_out)
		o->ceiling = 0; /* ECHO has no tensor for the GPU */
	bench_describe(o, m->inputs, m->ninputs, m->input_desc,
	               sizeof(m->input_desc), m->request_desc,
	               sizeof(m->request_desc));
	return 0;
}

/* bench_connect opens the pool's connections. Returns 0 or -1 (said). */
static int bench_connect(bench_main *m)
{
	const bench_opts *o = &m->o;
	int rc;

	m->npoints = o->nrates ? o->nrates : o->nconc;
	for (unsigned i = 0; i < o->nconc; i++)
		if (o->conc[i] > m->nclients)
			m->nclients = o->conc[i];
	m->conns = calloc(m->nclients, sizeof(*m->conns));
	m->runs = calloc(m->npoints, sizeof(*m->runs));
	if (!m->conns || !m->runs) {
		fprintf(stderr, "frameprep-bench: out of memory\n");
		return -1;
	}
	for (unsigned i = 0; i < m->nclients; i++) {
		fprep_client **c = &m->conns[i].client;

		rc = fprep_client_open_trusting(c, m->url, o->timeout_ms,
		                                o->trust_owner);
		if (rc) {
			fprintf(stderr,
			        "frameprep-bench: cannot connect to %s: %s "
			        "(%s%s)\n",
			        m->url, fprep_strerror(rc),
			        fprep_client_last_error(NULL),
			        rc == FPREP_ETRANSPORT
			                ? "; is frameprepd running?"
			                : "");
			return -1;
		}
		fprep_client_set_spin(*c, o->spin_us);
		if (o->no_stage)
			fprep_client_set_staging(*c, 0);
		if (o->no_doorbell)
			(void)fprep_client_doorbell(*c, 0);
	}
	return 0;
}

/* bench_server_info asks the daemon what it runs; a server that cannot
 * answer INFO is still measured, since its frame replies are checked one
 * by one. */
static void bench_server_info(bench_main *m)
{
	fprep_result info;
	uint64_t cpu;
	int rc;

	memset(&info, 0, sizeof(info));
	snprintf(m->backend, sizeof(m->backend), "unknown");
	rc = fprep_client_info(m->conns[0].client, &info);
	if (rc == FPREP_OK && info.header.status == FPREP_OK && info.payload) {
		m->info_text = strndup(info.payload, info.payload_size);
		if (m->info_text) {
			bench_info_value(m->info_text, "backend", m->backend,
			                 sizeof(m->backend));
			bench_info_value(m->info_text, "device", m->device,
			                 sizeof(m->device));
			bench_info_value(m->info_text, "pid", m->pid_text,
			                 sizeof(m->pid_text));
			if (!m->backend[0])
				snprintf(m->backend, sizeof(m->backend),
				         "unknown");
		}
	} else {
		fprintf(stderr, "frameprep-bench: INFO failed: %s\n",
		        rc ? fprep_strerror(rc) : info.header.message);
	}
	fprep_result_fini(&info);
	/* The daemon's CPU time is read where it runs on this host. */
	if (strncmp(m->url, "ipc://", 6) == 0 && m->pid_text[0] != '\0')
		m->daemon_pid = strtol(m->pid_text, NULL, 10);
	if (m->daemon_pid > 0 && bench_cpu_us(m->daemon_pid, &cpu) != 0)
		m->daemon_pid = 0;
}

/* bench_prepare checks the requests against the daemon's limits (frames
 * it would drop unanswered stop the run before it starts; each client
 * learns the limits here, outside the timing), and opens the regions and
 * doorbells asked for. Returns 0 or -1 (said). */
static int bench_prepare(bench_main *m)
{
	const bench_opts *o = &m->o;
	int rc;

	for (unsigned i = 0; i < m->nclients && !o->shm_in; i++) {
		fprep_client *c = m->conns[i].client;

		for (size_t k = 0; k < m->ninputs; k++) {
			rc = fprep_client_check_request(c, &m->inputs[k].req);
			if (rc) {
				fprintf(stderr, "frameprep-bench: %s: %s: %s\n",
				        m->inputs[k].name, fprep_err_name(rc),
				        fprep_client_last_error(c));
				return -1;
			}
		}
	}
	if ((o->shm_in || o->shm_out) &&
	    bench_open_regions(m->conns, m->nclients, m->inputs, m->ninputs))
		return -1;
	if (o->cuda_out &&
	    bench_open_cuda(m->conns, m->nclients, m->inputs, m->ninputs))
		return -1;
	if (o->doorbell &&
	    (m->db0 = bench_doorbells(m->conns, m->nclients)) == UINT64_MAX)
		return -1;
	/* The staged frames go through the client's own doorbell: counted
	 * too, where INFO tells. */
	m->staged = !o->doorbell && !o->shm_in && !o->shm_out && !o->cuda_out &&
	            !o->no_stage && o->rois == 0 && o->batch == 0;
	if (m->staged)
		m->db0 = bench_doorbell_requests(m->conns[0].client);
	return 0;
}

/* bench_ceiling runs point p's load with ECHO requests into *res. Returns
 * 0 or -1. */
static int bench_ceiling(bench_main *m, bench_run *run, bench_result *res)
{
	char label[64];

	run->kind = FPREP_KIND_ECHO;
	run->duration_s = m->o.ceiling_s;
	run->warmup_s = m->o.warmup_s < 0.5 ? m->o.warmup_s : 0.5;
	snprintf(label, sizeof(label), "[ceiling c=%u]", run->streams);
	if (bench_run_exec(run, m->conns, label, res, NULL))
		return -1;
	m->ceiling_fail += bench_result_fail_count(res);
	return 0;
}

/* bench_measure runs point p's measured load into m->runs[p], with the
 * daemon's CPU time and the stage times where asked. Returns 0 or -1. */
static int bench_measure(bench_main *m, bench_run *run, unsigned p)
{
	const bench_opts *o = &m->o;
	bench_result *res = &m->runs[p];
	uint64_t cpu0 = 0, cpu1 = 0, t0, sent;
	char label[64];

	run->kind = o->echo ? FPREP_KIND_ECHO : FPREP_KIND_FRAME;
	run->open_loop = o->nrates > 0;
	run->rate = o->nrates ? o->rates[p] : 0;
	run->duration_s = o->duration_s;
	run->requests = o->requests;
	run->warmup_s = o->warmup_s;
	if (run->open_loop)
		snprintf(label, sizeof(label), "[%.0f/s pool %u]", run->rate,
		         run->streams);
	else
		snprintf(label, sizeof(label), "[c=%u]", run->streams);
	if (m->trace != NULL) {
		free(m->trace);
		if ((m->trace = bench_trace_alloc()) == NULL)
			return -1;
	}
	t0 = bench_now_ns();
	if (m->daemon_pid > 0 && bench_cpu_us(m->daemon_pid, &cpu0) != 0)
		m->daemon_pid = 0;
	if (bench_run_exec(run, m->conns, label, res, m->trace))
		return -1;
	sent = res->sent + res->warmup_sent;
	if (m->daemon_pid > 0 && bench_cpu_us(m->daemon_pid, &cpu1) == 0 &&
	    sent > 0) {
		res->cpu_us = (double)(cpu1 - cpu0) / (double)sent;
		res->cpu_cores = (double)(cpu1 - cpu0) * 1000.0 /
		                 (double)(bench_now_ns() - t0);
	}
	if (m->trace != NULL) {
		bench_trace_print(stdout, label, m->trace);
		if (m->trace->missing || m->trace->bad || !m->trace->traced)
			m->trace_fail = 1;
	}
	m->fail += bench_result_fail_count(res);
	return 0;
}

/* bench_point runs point p: its ECHO ceiling first where asked, then the
 * measured load. Returns 0 or -1. */
static int bench_point(bench_main *m, unsigned p)
{
	const bench_opts *o = &m->o;
	bench_result echo_res;
	double fps = 0, p50_us = 0;
	bench_run run;

	memset(&run, 0, sizeof(run));
	run.opts = o;
	run.inputs = m->inputs;
	run.ninputs = m->ninputs;
	run.streams = o->nrates ? o->conc[0] : o->conc[p];
	if (o->ceiling && !o->echo) {
		if (bench_ceiling(m, &run, &echo_res))
			return -1;
		if (echo_res.elapsed_s > 0)
			fps = (double)echo_res.ok / echo_res.elapsed_s;
		p50_us = (double)bench_hist_percentile(&echo_res.hist, 50) /
		         1000.0;
	}
	if (bench_measure(m, &run, p))
		return -1;
	m->runs[p].ceiling_fps = fps;
	m->runs[p].ceiling_p50_us = p50_us;
	return 0;
}

/* bench_write_report writes the report (table, doorbell count, files asked for)
 * and returns the exit status: 0, 1 (bad replies, a failed trace, an
 * interrupt) or 2 (a file not written). */
static int bench_write_report(bench_main *m)
{
	const bench_opts *o = &m->o;
	bench_report rep = {
	        .url = m->url,
	        .backend = m->backend,
	        .device = m->device,
	        .server_info = m->info_text ? m->info_text : "",
	        .input = m->input_desc,
	        .request = m->request_desc,
	        .inputs = (unsigned)m->ninputs,
	        .pcie_gbps = o->pcie_gbps,
	        .runs = m->runs,
	        .nruns = m->done,
	};
	int status = 0;

	bench_report_table(stdout, &rep);
	if (o->doorbell || (m->staged && m->db0 != UINT64_MAX))
		bench_doorbell_report(m->conns[0].client, m->db0,
		                      m->staged ? " (the clients' own, for "
		                                  "staged frames: the measured "
		                                  "runs', their warm-ups' and "
		                                  "the ECHO ceilings'; the "
		                                  "others went through the "
		                                  "socket)"
		                                : "");
	fflush(stdout);
	if (o->json && bench_report_json(o->json, &rep))
		status = 2;
	if (o->csv && bench_report_csv(o->csv, &rep))
		status = 2;
	if (o->plot && bench_report_plot(o->plot, &rep))
		status = 2;
	return status;
}

/* bench_verdict says what failed and returns the exit status, given the
 * report's. */
static int bench_verdict(const bench_main *m, int status)
{
	if (m->ceiling_fail)
		fprintf(stderr,
		        "frameprep-bench: %llu ECHO (ceiling) requests "
		        "failed\n",
		        (unsigned long long)m->ceiling_fail);
	if (m->trace_fail) {
		fprintf(stderr, "frameprep-bench: FAILED: --trace: replies "
		                "without a trace or with a malformed one (is "
		                "frameprepd run with --trace?)\n");
		status = 1;
	}
	if (m->fail || m->ceiling_fail) {
		fprintf(stderr, "frameprep-bench: FAILED: %llu bad replies\n",
		        (unsigned long long)(m->fail + m->ceiling_fail));
		status = 1;
	} else if (bench_interrupted) {
		fprintf(stderr, "frameprep-bench: interrupted\n");
		status = 1;
	}
	return status;
}

/* bench_main_fini releases what main set up. */
static void bench_main_fini(bench_main *m)
{
	for (unsigned i = 0; m->conns && i < m->nclients; i++) {
		fprep_region_close(m->conns[i].region);
		fprep_region_close(m->conns[i].cuda_region);
		bench_cuda_free(m->conns[i].cuda_dptr);
		free(m->conns[i].cuda_host);
		fprep_client_close(m->conns[i].client);
	}
	free(m->conns);
	free(m->runs);
	free(m->trace);
	free(m->info_text);
	bench_inputs_free(m->inputs, m->ninputs);
}

/* bench_start does everything before the first point. Returns 0, or 2
 * after saying why not. */
static int bench_start(bench_main *m)
{
	int rc = bench_setup(m);

	if (rc != 0)
		return rc;
	if (bench_connect(m) != 0)
		return 2;
	bench_server_info(m);
	if (m->o.trace && (m->trace = bench_trace_alloc()) == NULL) {
		fprintf(stderr, "frameprep-bench: out of memory\n");
		return 2;
	}
	return bench_prepare(m) != 0 ? 2 : 0;
}

int main(int argc, char **argv)
{
	static bench_main m;
	int rc, status;

	rc = bench_options_parse(argc, argv, &m.o);
	if (rc)
		return rc < 0 ? 0 : rc;
	signal(SIGPIPE, SIG_IGN);
	signal(SIGINT, bench_on_sigint);
	if (m.o.video != NULL)
		return bench_video_main(&m.o);
	status = bench_start(&m);
	for (m.done = 0;
	     status == 0 && m.done < m.npoints && !bench_interrupted; m.done++)
		if (bench_point(&m, m.done) != 0)
			status = 2;
	if (status == 0)
		status = bench_verdict(&m, bench_write_report(&m));
	bench_main_fini(&m);
	return status;
}
