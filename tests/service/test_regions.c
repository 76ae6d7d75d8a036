/*
 * test_regions.c: the daemon's table of shared-memory regions
 * (service/regions.c): limits, lookups confined to the owning connection,
 * ids, removal, and release only after the last request using a region is
 * done. The regions are real mappings of one shared-memory object; a fake
 * backend counts region_remove calls and unmaps as the real ones do.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "frameprep/frameprep.h"
#include "regions.h"

#define REGION_SIZE 4096u

struct fake_backend {
	fprep__backend b;
	unsigned removed; /* region_remove calls */
	uint32_t last_id; /* the last region removed */
};

static char regions_shm_name[64];

static void fake_region_remove(fprep__backend *b, fprep__shm_region *r)
{
	struct fake_backend *fb = (struct fake_backend *)b;

	assert_int_equal(r->users, 0);
	fb->removed++;
	fb->last_id = r->id;
	fprep__shm_region_unmap(r);
}

static int regions_setup(void **state)
{
	static struct fake_backend fb;
	int fd;

	snprintf(regions_shm_name, sizeof(regions_shm_name),
	         "/fprep-test-regions-%ld", (long)getpid());
	shm_unlink(regions_shm_name);
	fd = shm_open(regions_shm_name, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0 || ftruncate(fd, REGION_SIZE) != 0)
		return -1;
	close(fd);
	memset(&fb, 0, sizeof(fb));
	fb.b.name = "fake";
	fb.b.region_remove = fake_region_remove;
	*state = &fb;
	return 0;
}

static int regions_teardown(void **state)
{
	(void)state;
	shm_unlink(regions_shm_name);
	return 0;
}

/* region_map maps the test's object, size bytes of it. */
static fprep__shm_region *region_map(uint64_t size)
{
	char msg[FPREP_MESSAGE_SIZE];
	fprep__shm_region *r = NULL;

	assert_int_equal(fprep__shm_region_map(&r, regions_shm_name, size,
	                                   (uint64_t)getuid(), REGION_SIZE, msg,
	                                   sizeof(msg)),
	                 0);
	return r;
}

/* region_register does what the server does for a REGISTER: reserve, map,
 * add. Returns the region. */
static fprep__shm_region *region_register(fprep__regions *t, uint32_t pipe,
                                      uint64_t size)
{
	char msg[FPREP_MESSAGE_SIZE];
	fprep__shm_region *r;

	assert_int_equal(
	        fprep__regions_reserve(t, pipe, size, msg, sizeof(msg)), 0);
	r = region_map(size);
	fprep__regions_add(t, r, pipe);
	return r;
}

static void limits(void **state)
{
	struct fake_backend *fb = *state;
	char msg[FPREP_MESSAGE_SIZE];
	fprep__regions t;
	uint64_t bytes = 1;

	fprep__regions_init(&t, &fb->b, 2, 3000);
	assert_int_equal(fprep__regions_count(&t, &bytes), 0);
	assert_true(bytes == 0);
	region_register(&t, 1, 1000);
	region_register(&t, 1, 1000);

	/* Per connection: the third of pipe 1 is refused, pipe 2 is not. */
	msg[0] = '\0';
	assert_int_equal(fprep__regions_reserve(&t, 1, 1, msg, sizeof(msg)),
	                 FPREP_ELIMIT);
	assert_non_null(strstr(msg, "max-regions"));
	assert_non_null(strstr(msg, "2 regions"));

	/* In bytes, over all connections: 2000 + 1001 > 3000. */
	msg[0] = '\0';
	assert_int_equal(fprep__regions_reserve(&t, 2, 1001, msg, sizeof(msg)),
	                 FPREP_ELIMIT);
	assert_non_null(strstr(msg, "max-shm-bytes 3000"));
	assert_non_null(strstr(msg, "1001"));
	assert_int_equal(
	        fprep__regions_reserve(&t, 2, UINT64_MAX, msg, sizeof(msg)),
	        FPREP_ELIMIT);

	/* Exactly up to the limit, then a failed registration gives its
	 * bytes back. */
	assert_int_equal(fprep__regions_reserve(&t, 2, 1000, msg, sizeof(msg)),
	                 0);
	assert_int_equal(fprep__regions_count(&t, &bytes), 2);
	assert_true(bytes == 3000);
	assert_int_equal(fprep__regions_reserve(&t, 3, 1, msg, sizeof(msg)),
	                 FPREP_ELIMIT);
	fprep__regions_unreserve(&t, 1000);
	assert_int_equal(fprep__regions_count(&t, &bytes), 2);
	assert_true(bytes == 2000);

	/* A removed region's bytes and slot are free again. */
	assert_int_equal(fprep__regions_remove_pipe(&t, 1), 2);
	assert_int_equal(fprep__regions_count(&t, &bytes), 0);
	assert_true(bytes == 0);
	region_register(&t, 1, 3000);
	fprep__regions_fini(&t, &fb->b);
	assert_int_equal(fb->removed, 3);
}

/* max-regions 0 turns registration off. */
static void limit_zero(void **state)
{
	struct fake_backend *fb = *state;
	char msg[FPREP_MESSAGE_SIZE];
	fprep__regions t;

	fprep__regions_init(&t, &fb->b, 0, 1 << 20);
	assert_int_equal(fprep__regions_reserve(&t, 1, 1, msg, sizeof(msg)),
	                 FPREP_ELIMIT);
	assert_non_null(strstr(msg, "max-regions"));
	fprep__regions_fini(&t, &fb->b);
	assert_int_equal(fb->removed, 0);
}

static void add_find(void **state)
{
	struct fake_backend *fb = *state;
	fprep__shm_region *r[6];
	fprep__regions t;

	fprep__regions_init(&t, &fb->b, 16, 1 << 20);
	for (int i = 0; i < 6; i++) {
		r[i] = region_register(&t, (uint32_t)(i % 2 + 1), 64);
		assert_int_not_equal(r[i]->id, 0);
		assert_int_equal(r[i]->owner, (uint32_t)(i % 2 + 1));
		for (int j = 0; j < i; j++)
			assert_int_not_equal(r[i]->id, r[j]->id);
	}
	for (int i = 0; i < 6; i++) {
		uint32_t own = (uint32_t)(i % 2 + 1);

		assert_ptr_equal(fprep__regions_find(&t, r[i]->id, own), r[i]);
		/* Another connection's region is not found. */
		assert_null(fprep__regions_find(&t, r[i]->id, 3 - own));
		assert_null(fprep__regions_find(&t, r[i]->id, 99));
	}
	assert_null(fprep__regions_find(&t, 0, 1));
	assert_null(fprep__regions_find(&t, 12345, 1));

	/* A region the SIGBUS guard marked broken is not found either. */
	r[0]->broken = 1;
	assert_null(fprep__regions_find(&t, r[0]->id, 1));
	r[0]->broken = 0;
	fprep__regions_fini(&t, &fb->b);
	assert_int_equal(fb->removed, 6);
}

/* Ids stay unique and non-zero when the counter wraps around while the
 * first regions are still registered. */
static void ids_wrap(void **state)
{
	struct fake_backend *fb = *state;
	fprep__shm_region *r[8];
	fprep__regions t;

	fprep__regions_init(&t, &fb->b, 16, 1 << 20);
	r[0] = region_register(&t, 1, 64); /* id 1 */
	r[1] = region_register(&t, 2, 64); /* id 2 */
	t.next_id = UINT32_MAX - 1;
	for (int i = 2; i < 8; i++)
		r[i] = region_register(&t, (uint32_t)(i % 2 + 1), 64);
	for (int i = 0; i < 8; i++) {
		assert_int_not_equal(r[i]->id, 0);
		for (int j = 0; j < i; j++)
			assert_int_not_equal(r[i]->id, r[j]->id);
		assert_ptr_equal(fprep__regions_find(&t, r[i]->id, r[i]->owner),
		                 r[i]);
	}
	fprep__regions_fini(&t, &fb->b);
	assert_int_equal(fb->removed, 8);
}

static void remove_one(void **state)
{
	struct fake_backend *fb = *state;
	fprep__shm_region *a, *b;
	fprep__regions t;
	uint32_t id;
	uint64_t bytes;

	fprep__regions_init(&t, &fb->b, 16, 1 << 20);
	a = region_register(&t, 1, 100);
	b = region_register(&t, 1, 200);
	id = a->id;
	/* Only the owner can remove it; unknown ids are refused. */
	assert_int_equal(fprep__regions_remove(&t, id, 2), FPREP_EREGION);
	assert_int_equal(fprep__regions_remove(&t, 999, 1), FPREP_EREGION);
	assert_int_equal(fb->removed, 0);
	/* Not in use: released at once. */
	assert_int_equal(fprep__regions_remove(&t, id, 1), 0);
	assert_int_equal(fb->removed, 1);
	assert_int_equal(fb->last_id, id);
	assert_null(fprep__regions_find(&t, id, 1));
	assert_int_equal(fprep__regions_remove(&t, id, 1), FPREP_EREGION);
	assert_int_equal(fprep__regions_count(&t, &bytes), 1);
	assert_true(bytes == 200);
	assert_ptr_equal(fprep__regions_find(&t, b->id, 1), b);
	fprep__regions_fini(&t, &fb->b);
	assert_int_equal(fb->removed, 2);
	assert_true(t.bytes == 0);
}

static void remove_pipe(void **state)
{
	struct fake_backend *fb = *state;
	fprep__shm_region *keep;
	fprep__regions t;
	uint64_t bytes;

	fprep__regions_init(&t, &fb->b, 16, 1 << 20);
	region_register(&t, 1, 10);
	keep = region_register(&t, 2, 20);
	region_register(&t, 1, 30);
	region_register(&t, 1, 40);
	assert_int_equal(fprep__regions_remove_pipe(&t, 3), 0);
	assert_int_equal(fprep__regions_remove_pipe(&t, 1), 3);
	assert_int_equal(fb->removed, 3);
	assert_int_equal(fprep__regions_count(&t, &bytes), 1);
	assert_true(bytes == 20);
	assert_ptr_equal(fprep__regions_find(&t, keep->id, 2), keep);
	assert_int_equal(fprep__regions_remove_pipe(&t, 1), 0);
	fprep__regions_fini(&t, &fb->b);
	assert_int_equal(fb->removed, 4);
}

/* A removed region still in use leaves the table at once (not found, not
 * counted) but is released only at its last unuse; its bytes stay
 * reserved until then. */
static void use_unuse(void **state)
{
	struct fake_backend *fb = *state;
	fprep__shm_region *r[3];
	fprep__regions t;
	uint32_t id[3];
	uint64_t bytes;

	fprep__regions_init(&t, &fb->b, 16, 1 << 20);
	for (int i = 0; i < 3; i++) {
		r[i] = region_register(&t, 1, 100);
		id[i] = r[i]->id;
	}

	/* In use but not removed: unuse releases nothing. */
	fprep__regions_use(r[0]);
	fprep__regions_unuse(&t, r[0]);
	assert_int_equal(fb->removed, 0);
	assert_ptr_equal(fprep__regions_find(&t, id[0], 1), r[0]);

	for (int i = 0; i < 3; i++) {
		fprep__regions_use(r[i]);
		fprep__regions_use(r[i]);
	}
	assert_int_equal(fprep__regions_remove(&t, id[1], 1), 0);
	assert_int_equal(fprep__regions_remove_pipe(&t, 1), 2);
	assert_int_equal(fb->removed, 0);
	assert_int_equal(fprep__regions_count(&t, &bytes), 0);
	assert_true(bytes == 300);
	for (int i = 0; i < 3; i++)
		assert_null(fprep__regions_find(&t, id[i], 1));

	/* The middle of the closing list first, then its ends. */
	fprep__regions_unuse(&t, r[1]);
	assert_int_equal(fb->removed, 0);
	fprep__regions_unuse(&t, r[1]);
	assert_int_equal(fb->removed, 1);
	assert_int_equal(fb->last_id, id[1]);
	assert_true(t.bytes == 200);
	fprep__regions_unuse(&t, r[0]);
	fprep__regions_unuse(&t, r[2]);
	assert_int_equal(fb->removed, 1);
	fprep__regions_unuse(&t, r[2]);
	assert_int_equal(fb->removed, 2);
	assert_int_equal(fb->last_id, id[2]);
	fprep__regions_unuse(&t, r[0]);
	assert_int_equal(fb->removed, 3);
	assert_int_equal(fb->last_id, id[0]);
	assert_null(t.closing);
	assert_true(t.bytes == 0);
	fprep__regions_fini(&t, &fb->b);
	assert_int_equal(fb->removed, 3);
}

/* fini releases the table and the closing list, through the backend or,
 * once the backend is closed (NULL), by unmapping. */
static void fini_releases_all(void **state)
{
	struct fake_backend *fb = *state;
	fprep__shm_region *busy;
	fprep__regions t;

	fprep__regions_init(&t, &fb->b, 16, 1 << 20);
	region_register(&t, 1, 100);
	region_register(&t, 2, 100);
	busy = region_register(&t, 1, 100);
	fprep__regions_use(busy);
	assert_int_equal(fprep__regions_remove(&t, busy->id, 1), 0);
	assert_non_null(t.closing);
	/* What shutdown does once no request is left in flight. */
	busy->users = 0;
	fprep__regions_fini(&t, &fb->b);
	assert_int_equal(fb->removed, 3);
	assert_true(t.bytes == 0);
	assert_null(t.head);
	assert_null(t.closing);

	/* Without a backend: unmapped here (the leak checker sees the rest). */
	fprep__regions_init(&t, &fb->b, 16, 1 << 20);
	region_register(&t, 1, 100);
	busy = region_register(&t, 1, 100);
	fprep__regions_use(busy);
	assert_int_equal(fprep__regions_remove_pipe(&t, 1), 2);
	assert_int_equal(fb->removed, 4);
	busy->users = 0;
	fprep__regions_fini(&t, NULL);
	assert_int_equal(fb->removed, 4);
	assert_true(t.bytes == 0);
}

#define REGIONS_TEST(f)                                                        \
	cmocka_unit_test_setup_teardown(f, regions_setup, regions_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
	        REGIONS_TEST(limits),     REGIONS_TEST(limit_zero),
	        REGIONS_TEST(add_find),   REGIONS_TEST(ids_wrap),
	        REGIONS_TEST(remove_one), REGIONS_TEST(remove_pipe),
	        REGIONS_TEST(use_unuse),  REGIONS_TEST(fini_releases_all),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
