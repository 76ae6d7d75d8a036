/*
 * consumer.c: a program outside the tree, built against an installed
 * libframeprep (by pkg-config and by find_package), that calls into it.
 */
#include <stdio.h>
#include <string.h>

#include <frameprep/frameprep.h>

int main(void)
{
	char url[256];

	if (fprep_default_url(url, sizeof(url)) != FPREP_OK ||
	    strncmp(url, "ipc://", 6) != 0 ||
	    strcmp(fprep_err_name(FPREP_ELIMIT), "ELIMIT") != 0) {
		fprintf(stderr, "libframeprep answered wrongly\n");
		return 1;
	}
	printf("frameprep %s: default URL %s\n", FPREP_VERSION_STRING, url);
	return 0;
}
