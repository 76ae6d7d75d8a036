/*
 * cli_elements.h: the frameprep CLI's `crops` and `batch` commands
 * (cli_elements.c).
 */
#ifndef FPREP_CLI_ELEMENTS_H
#define FPREP_CLI_ELEMENTS_H

/* tool_elements_main runs `frameprep crops` or `frameprep batch` (cmd)
 * with argv[0] = cmd and its options and operands after it; returns the
 * exit status (0 ok, 1 refused, 2 usage, 3 transport or file error). */
int tool_elements_main(const char *cmd, int argc, char **argv);

#endif /* FPREP_CLI_ELEMENTS_H */
