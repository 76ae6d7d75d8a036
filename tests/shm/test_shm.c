/*
 * test_shm.c: the daemon side of shared-memory regions: name syntax, owner
 * and size checks, span arithmetic, and the SIGBUS guard against a client
 * that shrinks its object while the daemon reads it.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "cmocka_main.h"

#include "frameprep/frameprep.h"
#include "memreg.h"
#include "shm_region.h"

static char test_name[64];

static int make_object(size_t size)
{
	int fd;

	snprintf(test_name, sizeof(test_name), "/fprep-test-%ld",
	         (long)getpid());
	shm_unlink(test_name);
	fd = shm_open(test_name, O_RDWR | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	return fd;
}

static void test_name_check(void **state)
{
	char msg[FPREP_MESSAGE_SIZE];
	static const char *const bad[] = {
	        "",    "/",  "x",       "noslash",        "/a/b",
	        "/..", "/.", "/sp ace", "/../etc/passwd", "/tab\t",
	};
	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(fprep__shm_region_name_check(bad[i],
		                                              strlen(bad[i]),
		                                              msg, sizeof(msg)),
		                 FPREP_EINVAL);
	char longname[80];
	memset(longname, 'a', sizeof(longname));
	longname[0] = '/';
	assert_int_equal(
	        fprep__shm_region_name_check(longname, 64, msg, sizeof(msg)),
	        FPREP_EINVAL);
	assert_int_equal(
	        fprep__shm_region_name_check(longname, 63, msg, sizeof(msg)),
	        0);
	assert_int_equal(fprep__shm_region_name_check("/frameprep-12-0", 15,
	                                              msg, sizeof(msg)),
	                 0);
}

static void test_map_checks(void **state)
{
	char msg[FPREP_MESSAGE_SIZE];
	fprep__shm_region *r;
	uint64_t uid = (uint64_t)getuid();
	int fd = make_object(1 << 20);
	(void)state;

	/* Foreign owner: the peer claims another uid than the file's. */
	assert_int_equal(fprep__shm_region_map(&r, test_name, 4096, uid + 1,
	                                       1 << 30, msg, sizeof(msg)),
	                 FPREP_EPERM);
	assert_non_null(strstr(msg, "owned by uid"));
	assert_null(r);
	/* Larger than the object. */
	assert_int_equal(fprep__shm_region_map(&r, test_name, 2 << 20, uid,
	                                       1 << 30, msg, sizeof(msg)),
	                 FPREP_EINVAL);
	/* Over the limit, and zero. */
	assert_int_equal(fprep__shm_region_map(&r, test_name, 1 << 20, uid,
	                                       1 << 19, msg, sizeof(msg)),
	                 FPREP_ELIMIT);
	assert_int_equal(fprep__shm_region_map(&r, test_name, 0, uid, 1 << 30,
	                                       msg, sizeof(msg)),
	                 FPREP_ELIMIT);
	/* Missing object. */
	assert_int_equal(fprep__shm_region_map(&r, "/fprep-test-absent", 4096,
	                                       uid, 1 << 30, msg, sizeof(msg)),
	                 FPREP_EREGION);
	/* A symbolic link is refused (O_NOFOLLOW). */
	char link[128], target[128];
	snprintf(link, sizeof(link), "/dev/shm/fprep-test-link-%ld",
	         (long)getpid());
	snprintf(target, sizeof(target), "/dev/shm%s", test_name);
	unlink(link);
	if (symlink(target, link) == 0) {
		assert_int_not_equal(fprep__shm_region_map(&r, link + 8, 4096,
		                                           uid, 1 << 30, msg,
		                                           sizeof(msg)),
		                     0);
		unlink(link);
	}
	/* A good one, shared with the creator. */
	assert_int_equal(fprep__shm_region_map(&r, test_name, 1 << 20, uid,
	                                       1 << 30, msg, sizeof(msg)),
	                 0);
	uint8_t *mine =
	        mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(mine != MAP_FAILED);
	mine[12345] = 0xa5;
	assert_int_equal(r->base[12345], 0xa5);
	munmap(mine, 1 << 20);
	fprep__shm_region_unmap(r);
	close(fd);
	shm_unlink(test_name);
}

static void test_span(void **state)
{
	char msg[FPREP_MESSAGE_SIZE];
	fprep__memreg r = {.id = 7, .size = 1000};
	(void)state;
	assert_int_equal(
	        fprep__memreg_span(&r, 0, 1000, "in", msg, sizeof(msg)), 0);
	assert_int_equal(
	        fprep__memreg_span(&r, 1, 1000, "in", msg, sizeof(msg)),
	        FPREP_EINVAL);
	assert_int_equal(
	        fprep__memreg_span(&r, UINT64_MAX, 2, "out", msg, sizeof(msg)),
	        FPREP_EINVAL);
	assert_non_null(strstr(msg, "out"));
	assert_int_equal(fprep__memreg_span(&r, 2, UINT64_MAX - 1, "in", msg,
	                                    sizeof(msg)),
	                 FPREP_EINVAL);
}

static void test_sigbus_guard(void **state)
{
	char msg[FPREP_MESSAGE_SIZE];
	fprep__shm_region *r;
	volatile unsigned sum = 0;
	size_t size = 1 << 20;
	int fd = make_object(size);
	(void)state;

	assert_int_equal(fprep__shm_guard_install(), 0);
	assert_int_equal(fprep__shm_region_map(&r, test_name, size, getuid(),
	                                       1 << 30, msg, sizeof(msg)),
	                 0);
	/* Untouched accesses leave the region whole. */
	sum += r->base[0];
	assert_false(r->broken);
	/* The client shrinks the object: reads past the end would SIGBUS. */
	assert_int_equal(ftruncate(fd, 0), 0);
	for (size_t i = 0; i < size; i += 4096)
		sum += r->base[i];
	r->base[size - 1] = 1; /* writes too */
	assert_true(r->broken);
	fprep__shm_region_unmap(r);
	close(fd);
	shm_unlink(test_name);
	(void)sum;
}

CMOCKA_MAIN({
        cmocka_unit_test(test_name_check),
        cmocka_unit_test(test_map_checks),
        cmocka_unit_test(test_span),
        cmocka_unit_test(test_sigbus_guard),
})
