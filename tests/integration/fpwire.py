"""fpwire.py: frameprep wire protocol v1 written independently in Python
(struct), for the integration tests: builds requests, including malformed
ones, and parses replies. Layout: include/frameprep/protocol.h."""
import struct

REQUEST_MAGIC = 0x51525046
REPLY_MAGIC = 0x50525046
VERSION = 1
REQ_HDR = 128
REP_HDR = 256
KIND = {"FRAME": 1, "INFO": 2, "ECHO": 3, "REGISTER": 4, "UNREGISTER": 5}
ERR = {0: "OK", 1: "EPROTO", 2: "EVERSION", 3: "EINVAL", 4: "ELIMIT",
       5: "ENOMEM", 6: "EBUSY", 7: "ESHUTDOWN", 8: "ECUDA", 9: "ENVRTC",
       10: "ETRANSPORT", 11: "ETIMEDOUT", 12: "EREGION", 13: "EPERM",
       14: "EINTERNAL", 15: "EIO", 16: "EUNSUPPORTED", 17: "ECLOSED",
       18: "EMISMATCH", 19: "EFORKED", 20: "EBITSTREAM"}
ERRNO = {v: k for k, v in ERR.items()}
BPP = {1: 3, 2: 3, 3: 4, 4: 4, 5: 1}


def request(kind=1, request_id=1, src_format=1, width=64, height=48,
            stride=None, out_width=32, out_height=32, resize=1, order=1,
            dtype=1, layout=1, pad=114.0, scale=1 / 255.0, mean=(0, 0, 0),
            std=(1, 1, 1), input_size=None, magic=REQUEST_MAGIC,
            version=VERSION, payload=None):
    """Returns a whole request message (header + payload). Every field can
    be overridden, so invalid requests are easy to build."""
    bpp = BPP.get(src_format, 3)
    if stride is None:
        stride = width * bpp
    if input_size is None:
        input_size = stride * height
    hdr = struct.pack("<IHHQHHIIIIIBBBBff3f3fBBHIIQQQQQ",
                      magic, version, kind, request_id, src_format, 0,
                      width, height, stride, out_width, out_height, resize,
                      order, dtype, layout, pad, scale, *mean, *std, 0, 0, 0,
                      0, 0, 0, 0, 0, input_size, 0)
    assert len(hdr) == REQ_HDR, len(hdr)
    if kind in (KIND["INFO"],):
        return hdr
    if payload is None:
        payload = bytes((i * 7) & 255 for i in range(min(input_size,
                                                         1 << 24)))
    return hdr + payload


def reply(msg):
    """Parses a reply message into a dict; raises ValueError if it is not
    one."""
    if len(msg) < REP_HDR:
        raise ValueError(f"reply of {len(msg)} bytes is shorter than the "
                         f"{REP_HDR}-byte header")
    (magic, version, kind, request_id, status, dtype, layout, ndim, oloc,
     s0, s1, s2, s3, sx, sy, px, py, tq, tc, th, tk, td, tt, payload_size,
     tensor_size, region, flags) = struct.unpack_from(
        "<IHHQIBBBB4I4f6IQQII", msg, 0)
    if magic != REPLY_MAGIC:
        raise ValueError(f"bad reply magic {magic:#x}")
    message = msg[104:256].split(b"\0", 1)[0].decode("utf-8", "replace")
    if payload_size != len(msg) - REP_HDR:
        raise ValueError(f"payload_size {payload_size} but "
                         f"{len(msg) - REP_HDR} bytes follow")
    return dict(version=version, kind=kind, request_id=request_id,
                status=status, status_name=ERR.get(status, str(status)),
                dtype=dtype, layout=layout, ndim=ndim,
                shape=(s0, s1, s2, s3), scale=(sx, sy), pad=(px, py),
                t_total_us=tt, payload_size=payload_size,
                tensor_size=tensor_size, message=message,
                payload=msg[REP_HDR:])


class SpReq:
    """A raw nng REQ peer over ipc:// written on a plain AF_UNIX socket: SP
    handshake, then each message as type 1, a 64-bit big-endian length, a
    4-byte request id (high bit set) and the body. Requests can be
    pipelined without reading the replies, which no cooked REQ socket
    does."""

    def __init__(self, url, timeout=30.0):
        import socket
        path = url[len("ipc://"):] if url.startswith("ipc://") else url
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.sock.sendall(b"\0SP\0" + struct.pack(">HH", 0x30, 0))
        peer = self._read(8)
        if peer[:4] != b"\0SP\0" or struct.unpack(">H", peer[4:6])[0] != 0x31:
            raise ValueError(f"not an nng REP peer: {peer!r}")
        self.next_id = 1

    def _read(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(min(n - len(buf), 1 << 20))
            if not chunk:
                raise ConnectionError("connection closed by the daemon")
            buf += chunk
        return bytes(buf)

    def send(self, body):
        """Sends one request; returns its SP request id."""
        rid = self.next_id
        self.next_id += 1
        self.sock.sendall(b"\x01" + struct.pack(">QI", len(body) + 4,
                                                0x80000000 | rid) + body)
        return rid

    def recv(self):
        """Reads one reply: (SP request id, body)."""
        hdr = self._read(9)
        if hdr[0] != 1:
            raise ValueError(f"message type {hdr[0]}")
        n = struct.unpack(">Q", hdr[1:])[0]
        if n < 4:
            raise ValueError(f"reply of {n} bytes has no request id")
        msg = self._read(n)
        return struct.unpack(">I", msg[:4])[0] & 0x7FFFFFFF, msg[4:]

    def close(self):
        self.sock.close()
