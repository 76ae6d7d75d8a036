/*
 * cli_video.h: the frameprep CLI's `video` command (cli_video.c).
 */
#ifndef FPREP_CLI_VIDEO_H
#define FPREP_CLI_VIDEO_H

/* tool_video_main runs `frameprep video FILE` with argv[0] = "video" and
 * its options and operand after it; returns the exit status (0 ok, 1 a
 * packet or the stream refused, 2 usage, 3 transport or file error). */
int tool_video_main(int argc, char **argv);

#endif /* FPREP_CLI_VIDEO_H */
