/*
 * error.c: names and descriptions of enum fprep_err.
 *
 * Both tables come from FPREP_ERRNO_MAP in frameprep.h, so a new code needs
 * one line there and nothing here.
 */
#include "frameprep/frameprep.h"

const char *fprep_strerror(int err)
{
	switch (err) {
#define FPREP_ERR_TEXT(name, num, text)                                        \
	case FPREP_##name:                                                     \
		return text;
		FPREP_ERRNO_MAP(FPREP_ERR_TEXT)
#undef FPREP_ERR_TEXT
	}
	return "unknown error";
}

const char *fprep_err_name(int err)
{
	switch (err) {
#define FPREP_ERR_NAME(name, num, text)                                        \
	case FPREP_##name:                                                     \
		return #name;
		FPREP_ERRNO_MAP(FPREP_ERR_NAME)
#undef FPREP_ERR_NAME
	}
	return "UNKNOWN";
}
