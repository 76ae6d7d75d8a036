"""The test video streams that ffmpeg makes of a photograph: a pan and
zoom at 25 fps, 2 B-frames, an IDR (H.264) or IRAP (HEVC) picture every 8
frames; shared by the daemon's video tests (tests/integration) and the
Python package's (tests/python)."""


def pan_zoom_args(photo, size, codec, frames, out):
    """Returns the ffmpeg arguments, after the global options, that encode
    frames frames of the photograph at path photo, panned and zoomed at
    size (width, height), with codec "libx264" or "libx265", into the
    file out (its container by its extension)."""
    w, h = size
    zoom = (f"zoompan=z='1+0.01*on':x='on*3':y='on*2':d=1:s={w}x{h}:fps=25,"
            "format=yuv420p")
    enc = (["-c:v", "libx264", "-bf", "2", "-g", "8",
            "-x264-params", "scenecut=0:open-gop=0"]
           if codec == "libx264" else
           ["-c:v", "libx265", "-x265-params",
            "bframes=2:keyint=8:min-keyint=8:scenecut=0:open-gop=0:"
            "log-level=error"])
    return ["-loop", "1", "-i", photo, "-vf", zoom, "-frames:v", str(frames),
            *enc, out]
