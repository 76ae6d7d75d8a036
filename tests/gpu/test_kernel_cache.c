/*
 * test_kernel_cache.c: NVRTC compilation and the on-disk kernel cache,
 * without a GPU (NVRTC needs no driver). Every test works in its own
 * temporary cache directory.
 */
#include <dirent.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cmocka_main.h"

#include "frameprep/frameprep.h"
#include "gpu/kernel_cache.h"

#define TEST_CC 90

static const char *const test_entries[] = {
        "fprep_letterbox_f32",      "fprep_letterbox_f16",
        "fprep_letterbox_u8",       "fprep_letterbox_nv12_f32",
        "fprep_letterbox_nv12_f16", "fprep_letterbox_nv12_u8",
        "fprep_letterbox_i420_f32", "fprep_letterbox_i420_f16",
        "fprep_letterbox_i420_u8",  "fprep_letterbox_yuyv_f32",
        "fprep_letterbox_yuyv_f16", "fprep_letterbox_yuyv_u8",
};

typedef struct test_dir {
	char path[64];
} test_dir;

static int test_setup(void **state)
{
	test_dir *d = calloc(1, sizeof *d);
	assert_non_null(d);
	snprintf(d->path, sizeof d->path, "/tmp/fprep-kcache-XXXXXX");
	assert_non_null(mkdtemp(d->path));
	*state = d;
	return 0;
}

/* test_count_files counts directory entries other than . and .., and
 * those whose name does not end in ".cubin" (temporary files). */
static int test_count_files(const char *dir, int *temps)
{
	DIR *dp = opendir(dir);
	struct dirent *e;
	int n = 0;

	*temps = 0;
	assert_non_null(dp);
	while ((e = readdir(dp)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		size_t len = strlen(e->d_name);
		if (len < 6 || strcmp(e->d_name + len - 6, ".cubin") != 0)
			(*temps)++;
		n++;
	}
	closedir(dp);
	return n;
}

static int test_teardown(void **state)
{
	test_dir *d = *state;
	DIR *dp = opendir(d->path);
	struct dirent *e;
	char p[512];

	while (dp != NULL && (e = readdir(dp)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof p, "%s/%s", d->path, e->d_name);
		unlink(p);
	}
	if (dp != NULL)
		closedir(dp);
	rmdir(d->path);
	free(d);
	return 0;
}

static const char *test_letterbox_source(void)
{
	for (const fprep__kernel_source *k = fprep__kernel_sources;
	     k->name != NULL; k++)
		if (strcmp(k->name, "letterbox.cu") == 0)
			return k->text;
	fail_msg("letterbox.cu is not embedded");
	return NULL;
}

static void test_compile_every_entry(void **state)
{
	(void)state;
	int nsources = 0;

	for (const fprep__kernel_source *k = fprep__kernel_sources;
	     k->name != NULL; k++, nsources++) {
		void *cubin = NULL;
		size_t size = 0;
		double ms = 0;
		char msg[FPREP_MESSAGE_SIZE];
		int err = fprep__nvrtc_compile(
		        k->name, k->text, fprep__kernel_headers, TEST_CC, NULL,
		        0, &cubin, &size, &ms, msg, sizeof msg);
		assert_int_equal(err, 0);
		assert_true(size > 64);
		assert_memory_equal(cubin,
		                    "\x7f"
		                    "ELF",
		                    4);
		if (strcmp(k->name, "letterbox.cu") == 0)
			for (size_t i = 0; i < 3; i++)
				assert_non_null(
				        memmem(cubin, size, test_entries[i],
				               strlen(test_entries[i]) + 1));
		printf("%s: sm_%d CUBIN %zu bytes, %.0f ms\n", k->name, TEST_CC,
		       size, ms);
		free(cubin);
	}
	assert_true(nsources >= 1);
	assert_int_equal(fprep__nvrtc_arch(90), 90);
	assert_int_equal(fprep__nvrtc_arch(10), 0);
}

static void test_compile_error_is_reported(void **state)
{
	(void)state;
	void *cubin = (void *)1;
	size_t size = 1;
	double ms = 0;
	char msg[FPREP_MESSAGE_SIZE];
	int err = fprep__nvrtc_compile("bad.cu",
	                               "extern \"C\" __global__ void k() { "
	                               "undeclared_thing(); }",
	                               NULL, TEST_CC, NULL, 0, &cubin, &size,
	                               &ms, msg, sizeof msg);
	assert_int_equal(err, FPREP_ENVRTC);
	assert_null(cubin);
	assert_int_equal(size, 0);
	assert_non_null(strstr(msg, "bad.cu"));
}

/* test_build runs fprep__kernel_build on letterbox.cu and returns how many
 * compiles it did; *hit tells whether it came from the cache. */
static unsigned test_build(fprep__kcache *c, int *hit, void **cubin,
                           size_t *size)
{
	char msg[FPREP_MESSAGE_SIZE];
	unsigned before = fprep__nvrtc_compile_count();
	assert_int_equal(fprep__kernel_build(c, "letterbox.cu",
	                                     test_letterbox_source(),
	                                     fprep__kernel_headers, TEST_CC, 0,
	                                     cubin, size, hit, msg, sizeof msg),
	                 0);
	assert_memory_equal(*cubin,
	                    "\x7f"
	                    "ELF",
	                    4);
	return fprep__nvrtc_compile_count() - before;
}

static void test_miss_then_hit(void **state)
{
	test_dir *d = *state;
	fprep__kcache *c = NULL;
	void *a = NULL, *b = NULL;
	size_t na = 0, nb = 0;
	int hit = -1, temps;
	unsigned hits, misses;

	assert_int_equal(fprep__kcache_open(&c, d->path, 1), 0);
	assert_string_equal(fprep__kcache_dir(c), d->path);
	assert_int_equal(test_build(c, &hit, &a, &na), 1);
	assert_int_equal(hit, 0);
	assert_int_equal(test_count_files(d->path, &temps), 1);
	assert_int_equal(temps, 0);
	fprep__kcache_close(c);

	/* A new handle (a restarted daemon) finds it without compiling. */
	assert_int_equal(fprep__kcache_open(&c, d->path, 1), 0);
	assert_int_equal(test_build(c, &hit, &b, &nb), 0);
	assert_int_equal(hit, 1);
	assert_int_equal(na, nb);
	assert_memory_equal(a, b, na);
	fprep__kcache_stats(c, &hits, &misses);
	assert_int_equal(hits, 1);
	assert_int_equal(misses, 0);
	fprep__kcache_close(c);
	free(a);
	free(b);
}

/* test_only_entry writes the path of the one entry in dir into path. */
static void test_only_entry(const char *dir, char *path, size_t size)
{
	DIR *dp = opendir(dir);
	struct dirent *e;
	int n = 0;

	assert_non_null(dp);
	while ((e = readdir(dp)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, size, "%s/%s", dir, e->d_name);
		n++;
	}
	closedir(dp);
	assert_int_equal(n, 1);
}

static void test_file_size(const char *path, off_t *size)
{
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	*size = st.st_size;
}

/* test_damage damages the cache entry in one of several ways. */
enum { DAMAGE_FLIP, DAMAGE_TRUNCATE, DAMAGE_HEADER, DAMAGE_EMPTY };

static void test_damage(const char *path, int how)
{
	off_t size;
	FILE *f;

	test_file_size(path, &size);
	switch (how) {
	case DAMAGE_FLIP:   /* one bit of the CUBIN, in the middle */
	case DAMAGE_HEADER: /* one bit of the stored key */
		f = fopen(path, "r+b");
		assert_non_null(f);
		long off = how == DAMAGE_FLIP ? (long)size / 2 + 7 : 9;
		assert_int_equal(fseek(f, off, SEEK_SET), 0);
		int ch = fgetc(f);
		assert_true(ch != EOF);
		assert_int_equal(fseek(f, off, SEEK_SET), 0);
		fputc(ch ^ 0x10, f);
		fclose(f);
		break;
	case DAMAGE_TRUNCATE:
		assert_int_equal(truncate(path, size - 100), 0);
		break;
	default:
		assert_int_equal(truncate(path, 0), 0);
		break;
	}
}

static void test_corrupt_entries_are_recompiled(void **state)
{
	test_dir *d = *state;
	fprep__kcache *c = NULL;
	char path[512];
	void *good = NULL, *again = NULL;
	size_t ngood = 0, nagain = 0;
	int hit;

	assert_int_equal(fprep__kcache_open(&c, d->path, 1), 0);
	assert_int_equal(test_build(c, &hit, &good, &ngood), 1);
	test_only_entry(d->path, path, sizeof path);
	for (int how = DAMAGE_FLIP; how <= DAMAGE_EMPTY; how++) {
		test_damage(path, how);
		assert_int_equal(test_build(c, &hit, &again, &nagain), 1);
		assert_int_equal(hit, 0);
		assert_int_equal(nagain, ngood);
		assert_memory_equal(again, good, ngood);
		free(again);
		/* The rewritten entry is whole again. */
		assert_int_equal(test_build(c, &hit, &again, &nagain), 0);
		assert_int_equal(hit, 1);
		free(again);
	}
	fprep__kcache_close(c);
	free(good);
}

static void test_get_checks_key_and_length(void **state)
{
	test_dir *d = *state;
	fprep__kcache *c = NULL;
	char a[512], b[512];
	unsigned char payload[1000];
	void *data = NULL;
	size_t size = 0;

	for (size_t i = 0; i < sizeof payload; i++)
		payload[i] = (unsigned char)(i * 7 + 3);
	assert_int_equal(fprep__kcache_open(&c, d->path, 1), 0);
	assert_int_equal(fprep__kcache_get(c, 42, &data, &size), FPREP_EIO);
	assert_int_equal(fprep__kcache_put(c, 42, payload, sizeof payload), 0);
	assert_int_equal(fprep__kcache_get(c, 42, &data, &size), 0);
	assert_int_equal(size, sizeof payload);
	assert_memory_equal(data, payload, size);
	free(data);

	/* An entry under another key's name is refused. */
	assert_int_equal(fprep__kcache_path(c, 42, a, sizeof a), 0);
	assert_int_equal(fprep__kcache_path(c, 43, b, sizeof b), 0);
	assert_int_equal(link(a, b), 0);
	assert_int_equal(fprep__kcache_get(c, 43, &data, &size), FPREP_EIO);
	assert_null(data);
	/* A longer file than the header says is refused. */
	FILE *f = fopen(a, "ab");
	assert_non_null(f);
	fputc(0, f);
	fclose(f);
	assert_int_equal(fprep__kcache_get(c, 42, &data, &size), FPREP_EIO);
	fprep__kcache_close(c);
}

static void test_key_changes(void **state)
{
	(void)state;
	const char *o1[] = {"--fmad=true"};
	const char *o2[] = {"--fmad=false"};
	uint64_t k = fprep__kcache_key("a.cu", "src", NULL, o1, 1, 13, 0, 90);

	assert_int_equal(
	        k, fprep__kcache_key("a.cu", "src", NULL, o1, 1, 13, 0, 90));
	assert_int_not_equal(
	        k, fprep__kcache_key("a.cu", "srd", NULL, o1, 1, 13, 0, 90));
	assert_int_not_equal(
	        k, fprep__kcache_key("b.cu", "src", NULL, o1, 1, 13, 0, 90));
	assert_int_not_equal(
	        k, fprep__kcache_key("a.cu", "src", NULL, o2, 1, 13, 0, 90));
	assert_int_not_equal(
	        k, fprep__kcache_key("a.cu", "src", NULL, NULL, 0, 13, 0, 90));
	assert_int_not_equal(
	        k, fprep__kcache_key("a.cu", "src", NULL, o1, 1, 13, 0, 89));
	assert_int_not_equal(
	        k, fprep__kcache_key("a.cu", "src", NULL, o1, 1, 13, 0, 100));
	assert_int_not_equal(
	        k, fprep__kcache_key("a.cu", "src", NULL, o1, 1, 12, 8, 90));
	assert_int_not_equal(
	        k, fprep__kcache_key("a.cu", "src", NULL, o1, 1, 13, 1, 90));
	/* Every header's name and text count. */
	const fprep__kernel_source h1[] = {{"a.h", "x"}, {NULL, NULL}};
	const fprep__kernel_source h2[] = {{"a.h", "y"}, {NULL, NULL}};
	const fprep__kernel_source h3[] = {{"b.h", "x"}, {NULL, NULL}};
	uint64_t kh = fprep__kcache_key("a.cu", "src", h1, o1, 1, 13, 0, 90);
	assert_int_not_equal(k, kh);
	assert_int_not_equal(
	        kh, fprep__kcache_key("a.cu", "src", h2, o1, 1, 13, 0, 90));
	assert_int_not_equal(
	        kh, fprep__kcache_key("a.cu", "src", h3, o1, 1, 13, 0, 90));
	/* Field boundaries count: ("ab", "c") is not ("a", "bc"). */
	assert_int_not_equal(
	        fprep__kcache_key("ab", "c", NULL, NULL, 0, 13, 0, 90),
	        fprep__kcache_key("a", "bc", NULL, NULL, 0, 13, 0, 90));
}

static void test_cache_off_writes_nothing(void **state)
{
	test_dir *d = *state;
	fprep__kcache *c = NULL;
	void *a = NULL;
	size_t na = 0;
	int hit, temps;

	assert_int_equal(fprep__kcache_open(&c, d->path, 0), 0);
	assert_string_equal(fprep__kcache_dir(c), "");
	assert_int_equal(test_build(c, &hit, &a, &na), 1);
	free(a);
	assert_int_equal(test_build(c, &hit, &a, &na), 1);
	assert_int_equal(hit, 0);
	free(a);
	assert_int_equal(fprep__kcache_put(c, 7, "x", 1), 0);
	assert_int_equal(test_count_files(d->path, &temps), 0);
	fprep__kcache_close(c);
}

/* Concurrent writers: each thread rewrites one key with its own payload
 * while a reader reads it; the reader must never see a torn entry, and no
 * temporary file may be left behind. */
#define RACE_WRITERS 4
#define RACE_ROUNDS  60
#define RACE_SIZE    (256 * 1024)

typedef struct race {
	const char *dir;
	int id;
	int torn;
	int reads;
	atomic_int *stop;
} race;

static void *race_writer(void *arg)
{
	race *r = arg;
	fprep__kcache *c = NULL;
	unsigned char *p = malloc(RACE_SIZE);

	if (p == NULL || fprep__kcache_open(&c, r->dir, 1) != 0)
		abort();
	memset(p, 'A' + r->id, RACE_SIZE);
	for (int i = 0; i < RACE_ROUNDS; i++)
		if (fprep__kcache_put(c, 99, p, RACE_SIZE) != 0)
			r->torn++;
	fprep__kcache_close(c);
	free(p);
	return NULL;
}

static void *race_reader(void *arg)
{
	race *r = arg;
	fprep__kcache *c = NULL;
	int seen = 0;

	if (fprep__kcache_open(&c, r->dir, 1) != 0)
		abort();
	while (!atomic_load(r->stop)) {
		void *data = NULL;
		size_t size = 0;
		int err = fprep__kcache_get(c, 99, &data, &size);
		if (err == 0) {
			const unsigned char *b = data;
			seen = 1;
			r->reads++;
			/* One writer's payload, whole. */
			if (size != RACE_SIZE || b[0] < 'A' ||
			    b[0] >= 'A' + RACE_WRITERS)
				r->torn++;
			for (size_t i = 0; i < size; i++)
				if (b[i] != b[0]) {
					r->torn++;
					break;
				}
		} else if (seen) {
			r->torn++; /* once there, it never disappears */
		}
		free(data);
	}
	fprep__kcache_close(c);
	return NULL;
}

static void test_concurrent_writers_never_tear(void **state)
{
	test_dir *d = *state;
	pthread_t w[RACE_WRITERS], rd;
	race rw[RACE_WRITERS], rr = {0};
	atomic_int stop = 0;
	int temps;

	rr.dir = d->path;
	rr.stop = &stop;
	assert_int_equal(pthread_create(&rd, NULL, race_reader, &rr), 0);
	for (int i = 0; i < RACE_WRITERS; i++) {
		rw[i] = (race){.dir = d->path, .id = i, .stop = &stop};
		assert_int_equal(
		        pthread_create(&w[i], NULL, race_writer, &rw[i]), 0);
	}
	for (int i = 0; i < RACE_WRITERS; i++) {
		pthread_join(w[i], NULL);
		assert_int_equal(rw[i].torn, 0);
	}
	atomic_store(&stop, 1);
	pthread_join(rd, NULL);
	printf("reader: %d whole reads, %d torn\n", rr.reads, rr.torn);
	assert_int_equal(rr.torn, 0);
	assert_true(rr.reads > 0);
	assert_int_equal(test_count_files(d->path, &temps), 1);
	assert_int_equal(temps, 0);
}

CMOCKA_MAIN({
        cmocka_unit_test(test_compile_every_entry),
        cmocka_unit_test(test_compile_error_is_reported),
        cmocka_unit_test(test_key_changes),
        cmocka_unit_test_setup_teardown(test_miss_then_hit, test_setup,
                                        test_teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_entries_are_recompiled,
                                        test_setup, test_teardown),
        cmocka_unit_test_setup_teardown(test_get_checks_key_and_length,
                                        test_setup, test_teardown),
        cmocka_unit_test_setup_teardown(test_cache_off_writes_nothing,
                                        test_setup, test_teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_writers_never_tear,
                                        test_setup, test_teardown),
})
