/*
 * shm_region.c: mapping, validation and fault protection of client
 * shared-memory regions (see shm_region.h).
 *
 * The SIGBUS guard keeps every mapped region in a fixed table that the
 * handler can read without locks. When a fault's address falls inside a
 * region, whichever thread touched it (a CPU worker, a host-copy helper,
 * the CUDA driver copying pageable memory), the region's pages are replaced
 * by anonymous zero pages with MAP_FIXED (mmap is async-signal-safe in
 * practice on Linux and is what libwayland does), the region is marked
 * broken, and the faulting instruction is retried. Any other SIGBUS is
 * re-raised with the default action.
 */
#include "shm_region.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frameprep/frameprep.h"

static fprep__shm_region *shm_guard_table[FPREP__REGIONS_MAX];
static struct sigaction shm_guard_old;
static int shm_guard_installed;

int fprep__shm_region_name_check(const char *name, size_t len, char *msg,
                                 size_t msg_size)
{
	if (len < 2 || len > FPREP_REGION_NAME_MAX || name[0] != '/') {
		snprintf(msg, msg_size,
		         "region name must be '/' and 1..%d characters "
		         "(length %zu)",
		         FPREP_REGION_NAME_MAX - 1, len);
		return FPREP_EINVAL;
	}
	for (size_t i = 1; i < len; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		      c == '-')) {
			snprintf(msg, msg_size,
			         "region name has a character outside "
			         "[A-Za-z0-9._-] at position %zu",
			         i);
			return FPREP_EINVAL;
		}
	}
	if ((len == 2 && name[1] == '.') ||
	    (len == 3 && name[1] == '.' && name[2] == '.')) {
		snprintf(msg, msg_size, "region name may not be '.' or '..'");
		return FPREP_EINVAL;
	}
	return 0;
}

/* shm_guard_add enters r in the guard's table; -1 when it is full. */
static int shm_guard_add(fprep__shm_region *r)
{
	for (int i = 0; i < FPREP__REGIONS_MAX; i++) {
		fprep__shm_region *none = NULL;
		if (__atomic_compare_exchange_n(&shm_guard_table[i], &none, r,
		                                0, __ATOMIC_SEQ_CST,
		                                __ATOMIC_SEQ_CST))
			return 0;
	}
	return -1;
}

static void shm_guard_remove(fprep__shm_region *r)
{
	for (int i = 0; i < FPREP__REGIONS_MAX; i++) {
		fprep__shm_region *self = r;
		if (__atomic_compare_exchange_n(&shm_guard_table[i], &self,
		                                NULL, 0, __ATOMIC_SEQ_CST,
		                                __ATOMIC_SEQ_CST))
			return;
	}
}

int fprep__shm_region_map(fprep__shm_region **rp, const char *name,
                          uint64_t size, uint64_t peer_uid, uint64_t max_size,
                          char *msg, size_t msg_size)
{
	fprep__shm_region *r;
	struct stat st;
	void *base;
	int fd, err;

	*rp = NULL;
	err = fprep__shm_region_name_check(name, strlen(name), msg, msg_size);
	if (err)
		return err;
	if (size == 0 || size > max_size || size > SIZE_MAX) {
		snprintf(msg, msg_size,
		         "region_size %llu outside 1..max_region_bytes %llu",
		         (unsigned long long)size,
		         (unsigned long long)max_size);
		return FPREP_ELIMIT;
	}
	fd = shm_open(name, O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(msg, msg_size, "shm_open %s: %s", name,
		         strerror(errno));
		return errno == EACCES ? FPREP_EPERM : FPREP_EREGION;
	}
	if (fstat(fd, &st) != 0) {
		snprintf(msg, msg_size, "fstat %s: %s", name, strerror(errno));
		err = FPREP_EREGION;
		goto err_fd;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(msg, msg_size, "region %s is not a regular file",
		         name);
		err = FPREP_EREGION;
		goto err_fd;
	}
	if ((uint64_t)st.st_uid != peer_uid) {
		snprintf(msg, msg_size,
		         "region %s is owned by uid %u, not the peer's uid "
		         "%llu",
		         name, (unsigned)st.st_uid,
		         (unsigned long long)peer_uid);
		err = FPREP_EPERM;
		goto err_fd;
	}
	if ((uint64_t)st.st_size < size) {
		snprintf(msg, msg_size,
		         "region %s is %lld bytes, less than region_size %llu",
		         name, (long long)st.st_size, (unsigned long long)size);
		err = FPREP_EINVAL;
		goto err_fd;
	}
	base = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
	            0);
	if (base == MAP_FAILED) {
		snprintf(msg, msg_size, "mmap %s: %s", name, strerror(errno));
		err = FPREP_EREGION;
		goto err_fd;
	}
	r = calloc(1, sizeof(*r));
	if (r == NULL) {
		snprintf(msg, msg_size, "out of memory");
		err = FPREP_ENOMEM;
		goto err_map;
	}
	snprintf(r->name, sizeof(r->name), "%s", name);
	r->base = base;
	r->size = size;
	if (shm_guard_add(r) != 0) {
		snprintf(msg, msg_size,
		         "the daemon maps %d regions already, its limit",
		         FPREP__REGIONS_MAX);
		err = FPREP_ELIMIT;
		goto err_alloc;
	}
	close(fd);
	*rp = r;
	return 0;

err_alloc:
	free(r);
err_map:
	munmap(base, (size_t)size);
err_fd:
	close(fd);
	return err;
}

void fprep__shm_region_unmap(fprep__shm_region *r)
{
	if (r == NULL)
		return;
	shm_guard_remove(r);
	munmap(r->base, (size_t)r->size);
	free(r);
}

static void shm_guard_handler(int sig, siginfo_t *si, void *uctx)
{
	uint8_t *addr = si->si_addr;

	for (int i = 0; i < FPREP__REGIONS_MAX; i++) {
		fprep__shm_region *r =
		        __atomic_load_n(&shm_guard_table[i], __ATOMIC_SEQ_CST);
		if (r == NULL || addr < r->base || addr >= r->base + r->size)
			continue;
		if (mmap(r->base, (size_t)r->size, PROT_READ | PROT_WRITE,
		         MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1,
		         0) == MAP_FAILED)
			break;
		atomic_store_explicit(&r->broken, 1, memory_order_release);
		return;
	}
	/* Not ours: behave as if the guard were not there. */
	if (shm_guard_old.sa_flags & SA_SIGINFO) {
		shm_guard_old.sa_sigaction(sig, si, uctx);
		return;
	}
	if (shm_guard_old.sa_handler != SIG_DFL &&
	    shm_guard_old.sa_handler != SIG_IGN) {
		shm_guard_old.sa_handler(sig);
		return;
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

int fprep__shm_guard_install(void)
{
	struct sigaction sa;

	if (shm_guard_installed)
		return 0;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = shm_guard_handler;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGBUS, &sa, &shm_guard_old) != 0)
		return FPREP_EINTERNAL;
	shm_guard_installed = 1;
	return 0;
}
