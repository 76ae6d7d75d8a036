/*
 * consumer.c: a program outside the tree, built against an installed
 * libframeprep (by pkg-config and by find_package), that calls into it.
 */
#include <stdio.h>
#include <string.h>

#include <frameprep/frameprep.h>
#include <frameprep/ring.h>

int main(void)
{
	char url[256];
	fprep_slots *slots;
	uint64_t ticket;
	unsigned k;

	if (fprep_default_url(url, sizeof(url)) != FPREP_OK ||
	    strncmp(url, "ipc://", 6) != 0 ||
	    strcmp(fprep_err_name(FPREP_ELIMIT), "ELIMIT") != 0) {
		fprintf(stderr, "libframeprep answered wrongly\n");
		return 1;
	}
	if (fprep_slots_alloc(&slots, 2) != FPREP_OK ||
	    fprep_slots_take(slots, FPREP_SLOT_TAKEN, 1, 1, 0, &k, &ticket) !=
	            FPREP_OK ||
	    fprep_slots_release(slots, k, ticket, 0) != 1) {
		fprintf(stderr, "libframeprep's slot table answered wrongly\n");
		return 1;
	}
	fprep_slots_free(slots);
	printf("frameprep %s: default URL %s\n", FPREP_VERSION_STRING, url);
	return 0;
}
