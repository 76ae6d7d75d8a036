/* clang-format off */
/*
 * frameprep wire protocol, version 1.
 *
 * One request is one nng message sent on a REQ socket to frameprepd's REP
 * socket; one reply comes back for every request the daemon accepts. Every
 * message starts with a fixed-size header; a payload may follow.
 *
 * Byte order: every integer is little-endian; every float is IEEE-754
 * binary32, little-endian. Offsets below are in bytes from the start of the
 * message. Reserved fields are written as zero and ignored on receipt.
 *
 * Request header (FPREP_REQUEST_HEADER_SIZE = 128 bytes)
 *
 *   off size field          meaning
 *     0  u32 magic          FPREP_REQUEST_MAGIC ("FPRQ")
 *     4  u16 version        FPREP_PROTOCOL_VERSION
 *     6  u16 kind           enum fprep_kind
 *     8  u64 request_id     chosen by the client, echoed in the reply
 *    16  u16 src_format     enum fprep_pixel_format of the source frame
 *    18  u8  yuv_matrix     enum fprep_yuv_matrix (YUV formats; 0 = BT.601)
 *    19  u8  yuv_range      enum fprep_yuv_range (YUV formats; 0 = limited)
 *    20  u32 src_width      source width in pixels, 1..limit
 *    24  u32 src_height     source height in pixels, 1..limit
 *    28  u32 src_stride     bytes from one row to the next, >= width * bpp
 *                           (NV12, I420: rows of the Y plane)
 *    32  u32 out_width      tensor width in pixels, 1..limit
 *    36  u32 out_height     tensor height in pixels, 1..limit
 *    40  u8  resize         enum fprep_resize (bits 0-3), plus the
 *                           rounding (bits 4-7): enum fprep_rounding
 *    41  u8  channel_order  enum fprep_channel_order of the tensor
 *    42  u8  dtype          enum fprep_dtype of the tensor
 *    43  u8  layout         enum fprep_layout of the tensor
 *    44  f32 pad_value      border value in source pixel units (0..255)
 *    48  f32 scale          multiplier applied to pixel values (e.g. 1/255)
 *    52  f32 mean[3]        subtracted after scaling, per tensor channel
 *    64  f32 std[3]         divisor after the mean, per tensor channel, > 0
 *    76  u8  input_loc      enum fprep_location of the source frame
 *    77  u8  output_loc     enum fprep_location of the tensor (bits 0-6),
 *                           plus FPREP_LOC_F_SHM_REPLY (bit 7): the reply
 *                           also in the output region (below)
 *    78  u16 uv_stride      NV12, I420: bytes from one chroma row to the
 *                           next, >= width (NV12) or width / 2 (I420);
 *                           so chroma rows span at most 65535 bytes
 *    80  u32 in_region      region id (input_loc SHM or CUDA), else 0
 *    84  u32 out_region     region id (output_loc SHM or CUDA), else 0
 *    88  u64 in_offset      byte offset of the frame in in_region
 *    96  u64 out_offset     byte offset of the tensor in out_region (a
 *                           multiple of the dtype's size: 4, 2 or 1)
 *   104  u64 out_capacity   bytes available at out_offset (shm or CUDA
 *                           output)
 *   112  u64 input_size     bytes of the source frame: the inline payload
 *                           (which must be exactly this long) or the bytes at
 *                           in_offset; must be >= stride * (height - 1) +
 *                           width * bpp, and hold every plane (below)
 *   120  u32 u_offset       NV12: the UV plane, I420: the U plane; bytes
 *                           from the start of the frame (the Y plane)
 *   124  u32 v_offset       I420: the V plane, bytes from the frame start
 *   128  ...                inline payload (input_loc == FPREP_LOC_INLINE)
 *
 * The tensor is normalised as out = (pixel * scale - mean[c]) / std[c], with
 * c indexing the tensor's channels in channel_order. The YOLO convention is
 * scale = 1/255, mean = 0, std = 1. FPREP_DTYPE_U8 tensors carry the resized
 * pixels rounded to the nearest integer, before normalisation, so scale,
 * mean and std must keep their defaults (1/255, 0, 1) or be (1, 0, 1).
 *
 * YUV sources (src_format NV12, I420, YUYV)
 *   The frame starts with the Y plane (NV12, I420: src_height rows of
 *   src_stride bytes, one byte per pixel) or the packed rows (YUYV:
 *   src_height rows of src_stride bytes, Y0 U Y1 V for each pixel pair).
 *   NV12 has a UV plane at u_offset: src_height/2 rows of uv_stride bytes,
 *   U V interleaved for each 2x2 block. I420 has a U plane at u_offset and
 *   a V plane at v_offset: src_height/2 rows of uv_stride bytes each, one
 *   byte per 2x2 block. Decoders pad (a 1080-row frame stored as 1088 rows,
 *   a pitch of 2048): say so with the offsets and strides. Each plane must
 *   lie inside input_size and the chroma planes start at or after the end
 *   of the Y plane. NV12 and I420 need an even width and height, YUYV an
 *   even width. YUYV ignores uv_stride, u_offset and v_offset, NV12
 *   v_offset; the other formats ignore all five YUV fields (old clients
 *   write them as zero).
 *
 *   Chroma: the 2x2 block (NV12, I420) or the 2x1 pair (YUYV) whose top-left
 *   pixel has even coordinates shares one chroma sample, which every pixel
 *   of the block uses as it is (no chroma interpolation), as OpenCV's
 *   cvtColor COLOR_YUV2RGB_NV12 / _I420 / _YUY2 does.
 *
 *   Each pixel is converted to RGB with the equations of ITU-R BT.601-7
 *   (Kr = 0.299, Kb = 0.114), BT.709-6 (Kr = 0.2126, Kb = 0.0722) or
 *   BT.2020-2 non-constant luminance (Kr = 0.2627, Kb = 0.0593), Kg = 1 -
 *   Kr - Kb:
 *     limited range: Y' = max(Y - 16, 0) / 219, Cb = (U - 128) / 224,
 *                    Cr = (V - 128) / 224 (luma codes below 16, "blacker
 *                    than black", are black, as in OpenCV's cvtColor)
 *     full range:    Y' = Y / 255, Cb = (U - 128) / 255, Cr = (V - 128) / 255
 *     R = Y' + 2 (1 - Kr) Cr
 *     G = Y' - 2 Kb (1 - Kb) / Kg Cb - 2 Kr (1 - Kr) / Kg Cr
 *     B = Y' + 2 (1 - Kb) Cb
 *   and each of R, G, B is scaled by 255, rounded half up and saturated to
 *   0..255 (float arithmetic; the exact steps are in src/ops.h). The RGB8
 *   image is then letterboxed or stretched exactly as an RGB8 source would
 *   be. BT.601 limited range is what OpenCV's COLOR_YUV2RGB_NV12 does.
 *
 * Request kinds
 *   FRAME   the header above plus the frame; answered with the tensor.
 *   INFO    the whole 128-byte header (fields after request_id are
 *           ignored, and so are any bytes after the header); answered with
 *           a UTF-8 text payload of "key: value" lines describing the daemon
 *           (version, backend, device, limits).
 *   ECHO    exactly like FRAME, validated the same way, but no preprocessing
 *           is done: the reply carries a tensor of the same shape and size
 *           whose contents are unspecified. It measures what the transport
 *           alone can carry (the transport ceiling).
 *   REGISTER  maps a client's POSIX shared-memory object into the daemon
 *           (ipc:// connections only). Header fields after request_id:
 *              16 u64 region_size  bytes to map, from offset 0 of the object
 *              24 u32 name_len     bytes of name, 2..FPREP_REGION_NAME_MAX
 *              28 u32 reserved
 *              32 char name[64]    "/name": '/' then [A-Za-z0-9._-]; the
 *                                  bytes after name_len are zero
 *           The object must be a regular file owned by the connection's
 *           peer UID and at least region_size bytes. The reply carries the
 *           new region's id in region_id (never 0; a daemon starts its ids
 *           at a random value, so that an id given by an earlier daemon on
 *           the same socket, in a request sent across a restart, names no
 *           region of this one but by a chance of about 1 in 2^32 per
 *           region of the connection). The region belongs to the
 *           connection: it is unmapped (and unpinned) when the connection
 *           closes, on UNREGISTER, or when the daemon stops.
 *   UNREGISTER  header field 16 u32 region_id. Requests already using the
 *           region finish first; the reply comes once the daemon has
 *           unmapped (and unpinned) it and no longer touches the memory.
 *           Works for both kinds of region.
 *   REGISTER_CUDA  opens a client's device memory through a CUDA IPC
 *           handle (ipc:// connections only). Header fields after
 *           request_id:
 *              16 u64 region_size  bytes of the client's buffer, >= 1
 *              24 u64 cuda_offset  bytes from the allocation's base (what
 *                                  the handle names) to the buffer
 *              32 u8  cuda_handle[64]  cudaIpcMemHandle_t of the
 *                                  allocation (cuIpcGetMemHandle)
 *              96 u8  cuda_uuid[16]    UUID of the allocation's device
 *                                  (cudaDeviceProp.uuid, cuDeviceGetUuid)
 *             112 u8  reserved[16]
 *           The daemon opens the handle once (cudaIpcOpenMemHandle) on
 *           the GPU lane whose device has that UUID and checks that
 *           [cuda_offset, cuda_offset + region_size) lies inside the
 *           allocation; the reply carries the region id. Requests then
 *           name it with the location FPREP_LOC_CUDA, and offsets in them
 *           count from the buffer's first byte. The handle is closed on
 *           UNREGISTER, when the connection closes (after its requests in
 *           flight end) or when the daemon stops. Refused (with a reason)
 *           over tcp://, by the CPU backend, when the daemon runs with
 *           --allow-cuda-regions=false, and past --max-cuda-regions per
 *           connection.
 *
 * CUDA regions, trust model: a CUDA IPC handle is a capability. Whoever
 * can connect to the daemon's socket can make it read and write the
 * device memory named by any handle that peer holds, and nothing else: the
 * daemon touches only [cuda_offset, cuda_offset + region_size) of an
 * allocation it opened for that connection. The socket's permissions are
 * the boundary (keep ipc:// sockets mode 0660 or stricter). Freeing the
 * memory while the daemon has it open is undefined behaviour in CUDA: a
 * client unregisters (and waits for the reply) before it frees.
 *
 * CUDA region FRAME requests: input_loc = CUDA reads the frame straight
 * from the client's device memory (no host-to-device copy); output_loc =
 * CUDA writes the tensor straight into it (no device-to-host copy). The
 * reply (payload_size 0 for CUDA output) is sent only after the GPU work
 * on that memory has completed: the consumer may read the tensor as soon
 * as it has the reply, with no synchronisation of its own. The producer
 * must have finished writing the frame (synchronised its stream) before it
 * sends the request; with CUDA input the reply carries
 * FPREP_REPLY_F_INPUT_RELEASED. Any combination of INLINE, SHM and CUDA
 * input and output is allowed; a region named with a location of the
 * other kind is refused.
 *
 * Shared-memory FRAME requests: input_loc = SHM names (in_region,
 * in_offset, input_size); output_loc = SHM names (out_region, out_offset,
 * out_capacity) and the reply then has payload_size 0 and tensor_size bytes
 * written at out_offset. Both must be regions registered by the same
 * connection. With SHM input the reply's flags carry
 * FPREP_REPLY_F_INPUT_RELEASED: the input bytes may be rewritten.
 *
 * The reply in shared memory (FPREP_LOC_F_SHM_REPLY in output_loc, SHM
 * output only): the daemon also writes the reply header into the last
 * FPREP_REPLY_HEADER_SIZE bytes of [out_offset, out_offset + out_capacity),
 * so out_capacity must be at least tensor bytes + FPREP_REPLY_HEADER_SIZE
 * and out_offset + out_capacity a multiple of 8. A client waiting there
 * learns of the reply without nng's receive path (its threads and
 * wake-ups): the client writes 0 into the area's request_id (offset 8)
 * before it sends; the daemon writes the header's other bytes, then
 * request_id with a release store, then wakes the futex at offset 8 (the
 * low 32 bits of request_id; FUTEX_WAKE, not private, Linux futex(2)).
 * The client waits with FUTEX_WAIT on those 32 bits and reads the header
 * after an acquire load of request_id shows its id (so the id's low 32
 * bits should not be 0). The daemon writes it for every reply of a
 * request whose output region it resolved, errors included, and then
 * sends nothing through nng for that request: the client must wait in the
 * region (a REQ client then cancels its receive, or sends its next
 * request on the context). A request refused before its output region
 * was resolved (an undecodable header, a bad region), or whose region the
 * daemon found truncated under it, is answered through nng alone, so the
 * client waits for nng's reply as well.
 *
 * Doorbells: requests through shared memory (DOORBELL, kind 7). A request
 * sent through nng crosses nng's I/O and task threads in both processes,
 * each a wake-up whose delay varies; a doorbell takes them out of the
 * request's way. The client keeps a doorbell area in one of its
 * shared-memory regions, and the daemon's loop thread polls it while it
 * spins (--spin-us: it is awake and has had an event within that time).
 * The area, at a multiple of 64 bytes from the region's start:
 *
 *   off  size                  field
 *     0  u32 polling           1 while the daemon polls this area, else 0
 *                              (written by the daemon only)
 *     4  u32 wake              bit 0 (ARMED, written by the daemon): a
 *                              thread of the daemon sleeps in futex(2) on
 *                              this word while it does not poll; bit 1
 *                              (RUNG): a client has set it since
 *    64  entries * 512 bytes   the entries, entry k at 64 + 512 * k:
 *          0  u32 state        FPREP_DOORBELL_FREE, _POSTED or _TAKEN
 *         64  128 bytes        a request header (FRAME or ECHO)
 *        256  256 bytes        its reply header
 *
 * The client fills an entry's request header, writes 0 into the reply's
 * request_id (offset 256 + 8), then stores state = POSTED and loads
 * polling, both sequentially consistent. The daemon takes a POSTED entry
 * with a compare-and-swap to TAKEN and then reads its request header, so
 * the client leaves the entry as it is until the reply is there; a client
 * takes its entry back with an atomic operation that turns POSTED into
 * FREE and leaves TAKEN as it is (a compare-and-swap from POSTED to FREE,
 * or clearing bit 0, after which it reads the state to learn who has the
 * request). When
 * the daemon stops polling it stores polling = 0 and then looks at every
 * entry once more, so a client that posted and then read polling as 1
 * will be served, and one that read 0 may take its entry back and send the
 * request through nng instead (so may one that waited too long): whichever
 * compare-and-swap succeeds decides who has the request. A client that
 * read polling as 0 may instead load wake, and if ARMED is set, set RUNG
 * with an atomic OR and FUTEX_WAKE the word (shared, not private): the
 * daemon then looks at its entries again and takes the request, which the
 * client leaves posted (taking it back only once the daemon neither polls
 * nor has the word armed, or when it waited too long). The daemon arms a
 * word (stores ARMED, which also clears RUNG) before it stores polling =
 * 0 and looks at the entries once more, and clears it after it stores
 * polling = 1, so that a client either sees polling = 1, or sees ARMED
 * and rings, or sees neither and uses nng. A taken request
 * is answered in its entry only, as "The reply in shared memory" describes
 * (the request_id written last with a release store, then FUTEX_WAKE on
 * its low 32 bits), errors included, and never through nng. Such a
 * request is a FRAME or ECHO whose input and output are both in regions
 * (SHM or CUDA) of the connection that set up the doorbell, so that its
 * reply has no payload; any other is refused there with a reason. It
 * counts against the connection's in-flight limit like any other: the
 * daemon takes no more of a connection's entries than that limit leaves
 * room for, and leaves the rest POSTED until one of its requests ends; it
 * serves at most --max-inflight requests from doorbells at once (a pool
 * of its own) and takes no more until one ends. A request whose output
 * (its tensor, or its reply in shared memory) would overlap a doorbell
 * area is refused (EINVAL). A wake word rung again and again with nothing
 * posted is left unarmed for a while (100 ms): its client, finding
 * neither polling nor ARMED, uses nng meanwhile.
 *   DOORBELL  header fields after request_id:
 *              16 u32 region_id    a shared-memory region of this
 *                                  connection
 *              20 u32 entries      1..FPREP_DOORBELL_ENTRIES_MAX; 0 stops
 *                                  polling the region's doorbell
 *              24 u64 offset       of the area in the region, a multiple
 *                                  of 64; the area must lie inside it
 *           One doorbell per region, at most --max-doorbells in the
 *           daemon. It goes when the region is unregistered, when the
 *           connection closes, or when the daemon stops.
 *
 * ROIS and BATCH requests: several tensors in one request, stacked into
 * one tensor of shape (N, C, H, W) (NHWC: (N, H, W, C)). The header is a
 * FRAME header (kind ROIS or BATCH) and validated as one; an element table
 * follows it, then the inline payload (if any):
 *
 *   128 u32 elements    N, 1..max_elements (INFO; at most
 *                       FPREP_ELEMENTS_MAX)
 *   132 u32 reserved
 *   136 N records of FPREP_ELEMENT_SIZE (32) bytes, element k at 136 + 32k:
 *      ROIS:  0 u8  type    FPREP_ELEM_BOX (1) or FPREP_ELEM_AFFINE (2)
 *             1 u8  resize  BOX: enum fprep_resize, 0: the header's
 *             2 u16 reserved
 *             4 f32 v[6]    BOX: x, y, w, h (source pixels; v[4], v[5]
 *                           zero); AFFINE: the 2x3 matrix m00 m01 m02
 *                           m10 m11 m12, source <- tensor
 *            28 u32 reserved
 *      BATCH: 0 u8  type    FPREP_ELEM_FRAME (3)
 *             1 u8[7] reserved
 *             8 u64 offset  of frame k: bytes from in_offset (SHM, CUDA)
 *                           or from the payload's start (INLINE)
 *            16 u8[16] reserved
 *   136 + 32N  inline payload: ROIS: the frame (input_size bytes); BATCH:
 *              the frames, exactly max_k(offset + input_size) bytes
 *
 * ROIS: one source frame (inline, SHM or CUDA, as a FRAME), N regions of
 * it. A BOX is the sub-image [x, x + w) x [y, y + h), letterboxed or
 * stretched like a whole frame: tensor column u of the resized box reads
 * the source column x + (u + 0.5) * w / resized_w - 0.5, bilinear, clamped
 * to the box's pixels (floor(x) .. ceil(x + w) - 1, as cv2.resize clamps to
 * the crop), so an integer box equals cv2.resize(frame[y:y+h, x:x+w]) +
 * copyMakeBorder. Pixels of the box outside the frame read as pad_value:
 * a box partly or wholly outside the frame is padded, not clipped (as
 * cv2.copyMakeBorder of the frame before the crop would). An AFFINE maps
 * tensor pixel (u, v) to source pixel (m00 u + m01 v + m02, m10 u + m11 v +
 * m12) and samples it as cv2.warpAffine(frame, m, (W_out, H_out),
 * flags=INTER_LINEAR | WARP_INVERSE_MAP, borderMode=BORDER_CONSTANT,
 * borderValue=pad_value) does (1/32-pixel positions, neighbours outside
 * the frame read as pad_value); the whole tensor is the warped image (no
 * letterbox). Refused by index ("element 3: w -1 is not > 0"): an unknown
 * type, a non-finite value, w or h <= 0, a value beyond
 * +-FPREP_ELEMENT_COORD_MAX.
 *
 * BATCH: N frames of one format and size (the header's), frame k at
 * offset k (above) in in_region (SHM, CUDA) or in the payload (INLINE);
 * each is letterboxed or stretched as a FRAME would be. The frames'
 * span, max_k(offset + input_size), must lie in the region; inline, it is
 * the payload.
 *
 * Inline, the table and the payload together are at most max_frame_bytes
 * (the daemon's message limit is that plus the header).
 *
 * Both: packed sources only (BGR8, RGB8, BGRA8, RGBA8, GRAY8); rounding
 * FLOAT only (exact mode is refused); N times
 * the element's tensor bytes at most max_batch_bytes (INFO), each element
 * within max_tensor_bytes; the input span (a ROIS's frame, a BATCH's
 * frames) at most max_batch_bytes; no
 * SHM_REPLY (the per-element transforms ride in the nng reply); not
 * through doorbells. The reply's header has shape (N, C, H, W) or (N, H,
 * W, C), tensor_size the whole tensor's bytes and the transform fields
 * zero; its payload is the tensor (inline output only) followed by N
 * transform records of FPREP_ELEMENT_XF_SIZE (32) bytes:
 *      0 u32 resized_w, 4 u32 resized_h, 8 u32 pad_x, 12 u32 pad_y,
 *     16 f32 scale_x, 20 f32 scale_y, 24 f32 origin_x, 28 f32 origin_y
 * so that tensor point (u, v) of element k is the source point (origin_x
 * + (u - pad_x) / scale_x, origin_y + (v - pad_y) / scale_y); origin is
 * the box's (x, y), 0 for a batch frame. An AFFINE's record is zero: its
 * mapping is its matrix.
 *
 * Video streams (STREAM_OPEN, STREAM_PACKET, STREAM_FLUSH, STREAM_CLOSE):
 * a connection opens a stream of H.264 or HEVC, sends its coded packets,
 * and gets back one tensor per decoded frame, in display order, each with
 * its pts. A stream belongs to the connection that opened it: it is
 * closed when the connection closes, on STREAM_CLOSE, or when the daemon
 * stops. Requests of one stream are served in the order of their seq
 * (below), or of their arrival where seq is 0; requests of different
 * streams run at once. Every request gets exactly one reply.
 *   STREAM_OPEN  a FRAME header that describes the tensors, every field as
 *           for FRAME, but:
 *              16 u16 src_format   the codec: FPREP_PIX_H264 (10) or
 *                                  FPREP_PIX_HEVC (11)
 *              18 u8  yuv_matrix   of the decoded frames, as for NV12
 *              19 u8  yuv_range    (0, 0: BT.601 limited, as OpenCV)
 *              20 u32 src_width    0 (the size comes from the bitstream)
 *              24 u32 src_height   0
 *             112 u64 input_size   bytes of the optional parameter sets
 *                                  (Annex-B: H.264 SPS and PPS, HEVC VPS,
 *                                  SPS and PPS), the inline payload; 0:
 *                                  none (they come in the packets)
 *           input_loc and output_loc INLINE (0), no SHM_REPLY,
 *           channel_order RGB or BGR; src_stride, uv_stride, in_region,
 *           out_region, in_offset, out_offset, out_capacity, u_offset and
 *           v_offset are ignored (written as zero). Refused with
 *           FPREP_ELIMIT past max_streams_per_conn streams of the
 *           connection or max_streams_per_uid of its peer's uid (INFO)
 *           or, decoded on a GPU, max_video_sessions streams of that GPU,
 *           with input_size past max_packet_bytes, and when the parameter
 *           sets give a coded size past max_width x max_height; by a
 *           backend with no decoder for the codec with
 *           FPREP_EUNSUPPORTED; parameter sets the decoder cannot read
 *           with FPREP_EBITSTREAM. The reply carries the stream's id in
 *           region_id (never 0; ids are not reused by a daemon).
 *   STREAM_PACKET, STREAM_FLUSH, STREAM_CLOSE  header fields after
 *           request_id:
 *              16 u32 stream_id    the id STREAM_OPEN gave
 *              20 u32 seq          the request's number in its stream: 1
 *                                  for the first after STREAM_OPEN, then
 *                                  one more for each PACKET, FLUSH and
 *                                  CLOSE. A client that keeps several
 *                                  requests of a stream in flight (each on
 *                                  its own nng context, whose arrival
 *                                  order nng does not keep) numbers them:
 *                                  the daemon holds one until the one
 *                                  numbered before it came (a number
 *                                  never sent holds the stream's later
 *                                  requests until the connection closes).
 *                                  Refused with FPREP_EINVAL when its
 *                                  number was served already, or is
 *                                  further ahead of the next one due than
 *                                  the daemon has request slots. 0: not
 *                                  numbered, served as it arrives.
 *              24 i64 pts          PACKET: the packet's presentation time,
 *                                  in the producer's units, handed back
 *                                  with the frame it decodes to; else 0
 *              32 u64 packet_size  PACKET: bytes of the packet, the
 *                                  inline payload, 1..max_packet_bytes;
 *                                  FLUSH, CLOSE: 0
 *              40 u8  output_loc   PACKET, FLUSH: where the frames'
 *                                  tensors go: INLINE (0, the reply's
 *                                  payload), SHM (1) or CUDA (2): into
 *                                  the region below, as for a FRAME's
 *                                  output (no SHM_REPLY bit); CLOSE: 0
 *              41 u8  reserved[3]
 *              44 u32 out_region   SHM, CUDA: a region of this
 *                                  connection, of that location; else 0
 *              48 u64 out_offset   SHM, CUDA: where frame 0's tensor
 *                                  starts in it; frame k's follows at
 *                                  out_offset + k x (tensor_size / N)
 *              56 u64 out_capacity SHM, CUDA: bytes at out_offset the
 *                                  tensors may fill (>= 1, inside the
 *                                  region, clear of doorbell areas)
 *              64 u8  reserved[64]
 *           PACKET: one Annex-B access unit (start codes and NAL units:
 *           its parameter sets, if any, and the slices of one picture).
 *           Its reply carries the frames the decoder let out after it:
 *           none (the decoder holds it to reorder B-frames), one, or
 *           several. A stream decodes from its first IDR (H.264) or IRAP
 *           (HEVC) picture: packets before it are dropped (answered
 *           FPREP_OK with no tensor and FPREP_REPLY_F_STREAM_SKIPPED). FLUSH: the decoder lets out every frame it holds;
 *           the stream then takes packets again, starting at an IDR
 *           (H.264) or IRAP (HEVC) picture. CLOSE: ends the stream;
 *           frames it still held are dropped; the reply has no tensor.
 *           A stream holds at most max_stream_frames decoded frames (the
 *           decoder's reorder queue and one reply's tensors together):
 *           a packet or flush whose reply would carry more is answered
 *           FPREP_ELIMIT naming the limit, and the stream waits for the
 *           next IDR as after a broken packet.
 *           A stream_id that names no stream of this connection:
 *           FPREP_EINVAL.
 *
 *   Coded size: the decoder reads each sequence parameter set (in the
 *   STREAM_OPEN payload or in a packet) before it allocates anything for
 *   it; a coded width past max_width, a height past max_height, or NV12
 *   bytes past max_frame_bytes is refused with FPREP_ELIMIT naming the
 *   limit (the packet is not decoded; the stream waits for the next IDR).
 *
 *   Broken bitstreams: a packet the decoder cannot decode (corrupt or
 *   truncated slices, missing parameter sets, a picture with errors) is
 *   answered FPREP_EBITSTREAM with a message that starts "broken bitstream: "
 *   and gives the codec, the packet's pts and the decoder's words;
 *   the stream then drops packets (answered FPREP_OK with no tensor and
 *   FPREP_REPLY_F_STREAM_SKIPPED in flags) until the next IDR (H.264) or
 *   IRAP (HEVC) picture, from which it decodes again. No other stream and
 *   no other request is affected.
 *
 *   Tensors in a region: a PACKET or FLUSH with output_loc SHM or CUDA
 *   has its frames' tensors written into out_region from out_offset,
 *   one after another, and its reply carries only their records. The
 *   region is checked in the loop as a FRAME's is (FPREP_EREGION: not a
 *   region of this connection, or of the other location; FPREP_EINVAL:
 *   the span outside it or over a doorbell area). CUDA needs a stream
 *   decoded on a GPU, and the region on that GPU (FPREP_EUNSUPPORTED on
 *   the CPU backend; FPREP_EREGION for another GPU's). A reply whose
 *   frames' tensors would pass out_capacity is answered FPREP_ELIMIT
 *   naming out_capacity; those frames are dropped and the stream goes on
 *   with the next packet: give room for the frames a packet may let out
 *   (one or two; a FLUSH: the decoder's reorder depth, up to
 *   max_stream_frames). The region stays in use until the reply is
 *   sent, and holds the tensors once it is (a CUDA region: written by a
 *   kernel the daemon waited for).
 *
 *   Reply to PACKET and FLUSH (status FPREP_OK): the header as for a
 *   BATCH, shape (N, C, H, W) or (N, H, W, C) with N >= 0 the frames
 *   the reply carries (N = 0: shape[0] 0 and tensor_size 0), tensor_size
 *   the whole tensor's bytes, scale/pad of the first frame (0 when N =
 *   0), output_loc the request's; the payload is the tensor (inline
 *   only) followed by N frame records of
 *   FPREP_STREAM_FRAME_SIZE (32) bytes, in display order:
 *      0 i64 pts     the pts of the packet the frame came from
 *      8 u32 width   the decoded frame's size in pixels (cropped, as
 *     12 u32 height  the decoder displays it)
 *     16 f32 scale_x, 20 f32 scale_y, 24 f32 pad_x, 28 f32 pad_y
 *                    the frame's transform, as a FRAME reply's
 *   Each decoded frame (8-bit 4:2:0) is preprocessed as an I420 FRAME of
 *   its size would be, with the stream's yuv_matrix and yuv_range.
 *
 * Every request, whatever its kind, carries the whole 128-byte header.
 *
 * Reply header (FPREP_REPLY_HEADER_SIZE = 256 bytes)
 *
 *   off size field          meaning
 *     0  u32 magic          FPREP_REPLY_MAGIC ("FPRP")
 *     4  u16 version        FPREP_PROTOCOL_VERSION
 *     6  u16 kind           the request's kind (0 if it could not be read)
 *     8  u64 request_id     the request's id (0 if it could not be read)
 *    16  u32 status         enum fprep_err; FPREP_OK = 0
 *    20  u8  dtype          tensor dtype
 *    21  u8  layout         tensor layout
 *    22  u8  ndim           number of used entries in shape (4 for tensors)
 *    23  u8  output_loc     where the tensor was written (inline, shm or
 *                           CUDA)
 *    24  u32 shape[4]       NCHW: (1, C, H, W); NHWC: (1, H, W, C)
 *    40  f32 scale_x        source pixels -> tensor pixels, x
 *    44  f32 scale_y        source pixels -> tensor pixels, y
 *    48  f32 pad_x          tensor pixels of padding on the left
 *    52  f32 pad_y          tensor pixels of padding on the top
 *                           A tensor point (u, v) maps back to the source
 *                           point ((u - pad_x) / scale_x,
 *                           (v - pad_y) / scale_y).
 *    56  u32 t_queue_us     receipt to start of work, microseconds; at
 *                           least 1 once the work began (0: it never did)
 *    60  u32 t_compute_us   preprocessing (CPU op or GPU kernel), microseconds
 *    64  u32 t_h2d_us       host-to-device copy (GPU only), microseconds
 *    68  u32 t_kernel_us    kernel (GPU only), microseconds; a frame
 *                           processed in bands (an idle staged lane)
 *                           spans its band kernels, which wait on the
 *                           H2D chunks
 *    72  u32 t_d2h_us       device-to-host copy (GPU only), microseconds
 *    76  u32 t_total_us     receipt to reply, microseconds, at least 1
 *                           (a span under 1 us reads 1); an error reply
 *                           has it too, and the stage times of the work
 *                           its request reached (a failure before the
 *                           backend: 0)
 *    80  u64 payload_size   bytes after this header
 *    88  u64 tensor_size    bytes of the tensor (inline or written to shm)
 *    96  u32 region_id      REGISTER: the new region's id;
 *                           STREAM_OPEN: the new stream's id
 *   100  u32 flags          FPREP_REPLY_F_* bits
 *   104  char message[144]  NUL-terminated human-readable text; on error it
 *                           names the field, the value and the limit; on
 *                           a successful FRAME/ECHO of a daemon run with
 *                           --trace, the request's stage times (below),
 *                           else empty
 *   248  u16 decoded_width  FRAME of a JPEG source: the decoded frame's
 *                           size in pixels (from the JPEG header); else 0
 *   250  u16 decoded_height
 *   252  u32 t_decode_us    FRAME of a JPEG source: the decode (header
 *                           check and entropy decode to RGB8/BGR8/GRAY8
 *                           on a CPU), microseconds; included in
 *                           t_compute_us on the CPU backend; on the GPU
 *                           backend the lane decodes into its staging
 *                           slot before t_h2d_us begins; else 0
 *                           (Until these three fields were added the
 *                           message spanned 152 bytes: an older daemon's
 *                           message of 144 bytes or more fills them.)
 *   256  ...                payload: tensor bytes (FRAME/ECHO inline output),
 *                           text (INFO), nothing otherwise
 *
 * The trace (frameprepd --trace): "trace us: loop=A lane=B h2d=C-D
 * kernel=E-F d2h=G-H done=I seen=J sent=K", microseconds since the request
 * was received (nng's callback): the loop thread took it (loop), the
 * backend began it (lane), the device's copy-in, kernel and copy-out began
 * and ended (h2d, kernel, d2h; CUDA events on the host's clock, absent on
 * the CPU backend and for ECHO), the backend finished (done), the loop
 * took the completion (seen) and handed the reply to nng (sent). The keys
 * come in that order and each figure is at least the one before it.
 *
 * JPEG sources (src_format JPEG)
 *   The frame is a JPEG file's bytes as they are (JFIF or Exif, baseline
 *   or progressive, 8-bit, 1 or 3 components, restart markers allowed):
 *   input_size bytes inline or in
 *   an SHM region (not CUDA: the decode runs on a CPU), at least 4 bytes.
 *   src_stride, the YUV fields and yuv_matrix/yuv_range are ignored;
 *   src_width and src_height are 0 or must equal the JPEG header's. The
 *   daemon reads the header before it allocates anything and refuses
 *   (FPREP_ELIMIT, naming the limit) a frame wider than max_width, taller
 *   than max_height or whose decoded RGB8 bytes exceed max_frame_bytes, and
 *   (FPREP_EINVAL, with libjpeg-turbo's words) one that is corrupt,
 *   truncated, 12-bit, CMYK/YCCK, of a chroma sampling libjpeg-turbo
 *   cannot name (4:2:0, 4:2:2, 4:4:4 and gray are tested), or that
 *   libjpeg-turbo warns about (corrupt data is an error: no partly grey
 *   frame). It is decoded as libjpeg-turbo does (cv2.imdecode decodes the
 *   same way: fancy upsampling, islow IDCT) to RGB8 or BGR8, as
 *   channel_order needs
 *   (GRAY8 for channel_order GRAY, which a JPEG source may ask for: the
 *   luma), then letterboxed or stretched like that raw frame. EXIF
 *   orientation is ignored: the tensor has the stored pixel order. The
 *   reply carries decoded_width/height and t_decode_us.
 *
 * Errors: a request that cannot be parsed still gets a reply with the best
 * kind/request_id that could be read and a status from enum fprep_err.
 * Messages larger than the daemon's limit (largest frame + header) are
 * refused by nng itself, which closes the connection: a cooked REQ client
 * then resends the request forever. Clients must respect the max_frame_bytes
 * reported by INFO.
 */
/* clang-format on */
#ifndef FRAMEPREP_PROTOCOL_H
#define FRAMEPREP_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

#include "frameprep/export.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FPREP_PROTOCOL_VERSION    1 /* the version this header describes */
#define FPREP_REQUEST_MAGIC       0x51525046u /* "FPRQ" as little-endian bytes */
#define FPREP_REPLY_MAGIC         0x50525046u /* "FPRP" as little-endian bytes */
#define FPREP_REQUEST_HEADER_SIZE 128         /* bytes of a request header */
#define FPREP_REPLY_HEADER_SIZE   256         /* bytes of a reply header */
#define FPREP_MESSAGE_SIZE        144         /* bytes of a reply's message */
#define FPREP_REGION_NAME_MAX     63 /* bytes of a region name, '/' included */

/* fprep_kind: what a request asks for. */
enum fprep_kind {
	FPREP_KIND_FRAME = 1,
	FPREP_KIND_INFO = 2,
	FPREP_KIND_ECHO = 3,
	/* REGISTER / UNREGISTER: shared-memory regions; their body layout is
	 * documented with the shared-memory API. */
	FPREP_KIND_REGISTER = 4,
	FPREP_KIND_UNREGISTER = 5,
	/* REGISTER_CUDA: a CUDA IPC region (see the table above). */
	FPREP_KIND_REGISTER_CUDA = 6,
	/* DOORBELL: requests through shared memory (see "Doorbells"). */
	FPREP_KIND_DOORBELL = 7,
	/* ROIS, BATCH: N crops of one frame, or N frames, into one tensor
	 * (see "ROIS and BATCH requests"). */
	FPREP_KIND_ROIS = 8,
	FPREP_KIND_BATCH = 9,
	/* STREAM_*: video streams (see "Video streams"). */
	FPREP_KIND_STREAM_OPEN = 10,
	FPREP_KIND_STREAM_PACKET = 11,
	FPREP_KIND_STREAM_FLUSH = 12,
	FPREP_KIND_STREAM_CLOSE = 13,
};

/* FPREP_KIND_LIMIT: one more than the largest request kind; a table
 * indexed by kind has FPREP_KIND_LIMIT entries. */
#define FPREP_KIND_LIMIT 14

/* fprep_kind_name returns kind's name in lower case ("frame",
 * "register_cuda"), or NULL when kind is not a request kind (0 included).
 * The one table of the kinds' names: logs and metrics labels use it. */
FPREP_EXTERN const char *fprep_kind_name(unsigned kind);

/* The doorbell area (see "Doorbells" above): its header, one entry, the
 * offsets in an entry, and the most entries an area may have. */
#define FPREP_DOORBELL_HEADER_SIZE 64  /* bytes before the first entry */
#define FPREP_DOORBELL_ENTRY_SIZE  512 /* bytes of one entry */
#define FPREP_DOORBELL_REQUEST_AT  64  /* the request header in an entry */
#define FPREP_DOORBELL_REPLY_AT    256 /* the reply header in an entry */
#define FPREP_DOORBELL_ENTRIES_MAX 64  /* the most entries of an area */
/* The area's wake word (offset 4) and its bits. */
#define FPREP_DOORBELL_WAKE_AT    4
#define FPREP_DOORBELL_WAKE_ARMED 1u /* the daemon sleeps on the word */
#define FPREP_DOORBELL_WAKE_RUNG  2u /* a client has rung it */

/* fprep_doorbell_state: an entry's state word. */
enum fprep_doorbell_state {
	FPREP_DOORBELL_FREE = 0,   /* the client's */
	FPREP_DOORBELL_POSTED = 1, /* a request waits to be taken */
	FPREP_DOORBELL_TAKEN = 2,  /* the daemon took the request */
};

/* fprep_pixel_format: layout of the source frame, 8 bits per sample.
 * GRAY8 has one channel; BGR8/RGB8 three; BGRA8/RGBA8 four (alpha is
 * ignored), interleaved. NV12, I420 (4:2:0, planar) and YUYV (4:2:2,
 * packed) are the YUV formats described above; JPEG is compressed (see
 * "JPEG sources"). */
enum fprep_pixel_format {
	FPREP_PIX_BGR8 = 1,
	FPREP_PIX_RGB8 = 2,
	FPREP_PIX_BGRA8 = 3,
	FPREP_PIX_RGBA8 = 4,
	FPREP_PIX_GRAY8 = 5,
	FPREP_PIX_NV12 = 6,
	FPREP_PIX_I420 = 7,
	FPREP_PIX_YUYV = 8,
	FPREP_PIX_JPEG = 9, /* a JPEG file's bytes (see "JPEG sources") */
	/* STREAM_OPEN only: the stream's codec (see "Video streams"). */
	FPREP_PIX_H264 = 10, /* H.264 / AVC, Annex-B */
	FPREP_PIX_HEVC = 11, /* H.265 / HEVC, Annex-B */
};

/* fprep_yuv_matrix: the colour matrix of a YUV source. 0 on the wire means
 * BT.601. */
enum fprep_yuv_matrix {
	FPREP_MATRIX_BT601 = 1,
	FPREP_MATRIX_BT709 = 2,
	FPREP_MATRIX_BT2020 = 3, /* non-constant luminance */
};

/* fprep_yuv_range: the quantisation range of a YUV source. LIMITED: Y in
 * 16..235, U and V in 16..240; FULL: 0..255. 0 on the wire means LIMITED. */
enum fprep_yuv_range {
	FPREP_RANGE_LIMITED = 1,
	FPREP_RANGE_FULL = 2,
};

/* fprep_resize: how the source is fitted to the tensor.
 * LETTERBOX: keep aspect ratio, r = min(W_out/W, H_out/H), resized size
 *   (round(W*r), round(H*r)) with round-half-even, bilinear resize matching
 *   OpenCV INTER_LINEAR, centred, padded with pad_value; left pad =
 *   round(dw - 0.1), top pad = round(dh - 0.1) where dw, dh are half the
 *   slack (Ultralytics LetterBox convention).
 * STRETCH: resize to exactly W_out x H_out, aspect not kept, bilinear
 *   (OpenCV INTER_LINEAR), no padding. */
enum fprep_resize {
	FPREP_RESIZE_LETTERBOX = 1,
	FPREP_RESIZE_STRETCH = 2,
};

/* fprep_rounding: how the resized pixel is formed, in bits 4-7 of the
 * wire's resize byte (FPREP_RESIZE_ROUNDING_SHIFT); decoded into
 * fprep_request.rounding, never left in resize. An older daemon refuses a
 * request with these bits set ("resize 17 is not a resize mode").
 * FLOAT (0, the default): the bilinear blend with OpenCV's 11-bit weights
 *   is kept in float, so F32/F16 tensors carry fractions of a pixel value
 *   (within 1 LSB of OpenCV's uint8 image, never bit-exact).
 * OPENCV (1, exact mode): the resized pixel is rounded to uint8 as
 *   cv2.resize(INTER_LINEAR) does for 8-bit images (OpenCV 4.x
 *   resizeGeneric_: horizontal sums s = p0 * a0 + p1 * a1 with the 11-bit
 *   integer weights, then v = (((b0 * (s0 >> 4)) >> 16) + ((b1 * (s1 >> 4))
 *   >> 16) + 2) >> 2), the padding is pad_value rounded half to even (as
 *   cv2.copyMakeBorder's value), and the tensor is that uint8 image
 *   normalised as usual, (v * scale - mean[c]) / std[c] in float32 (each
 *   step rounded), so that it equals cv2.resize + cv2.copyMakeBorder +
 *   numpy's float32 (img * scale - mean) / std bit for bit (a pipeline
 *   that divides by 255 matches with scale 1 and std 255). YUV sources:
 *   the frame is first converted to the RGB8 image described in "YUV
 *   sources" and that image is resized exactly; it equals OpenCV's
 *   cvtColor only as far as that conversion does. */
enum fprep_rounding {
	FPREP_ROUNDING_FLOAT = 0,
	FPREP_ROUNDING_OPENCV = 1,
};
#define FPREP_RESIZE_ROUNDING_SHIFT 4 /* rounding's bits in the resize byte */

/* fprep_channel_order: channel order of the tensor. GRAY is one channel and
 * requires a GRAY8 source; RGB and BGR are three channels (a GRAY8 source is
 * replicated into all three). */
enum fprep_channel_order {
	FPREP_ORDER_RGB = 1,
	FPREP_ORDER_BGR = 2,
	FPREP_ORDER_GRAY = 3,
};

/* fprep_dtype: element type of the tensor. F16 is IEEE binary16, rounded to
 * nearest even. U8 holds rounded pixels, without normalisation. */
enum fprep_dtype {
	FPREP_DTYPE_F32 = 1,
	FPREP_DTYPE_F16 = 2,
	FPREP_DTYPE_U8 = 3,
};

/* fprep_layout: tensor memory layout; N is always 1. */
enum fprep_layout {
	FPREP_LAYOUT_NCHW = 1,
	FPREP_LAYOUT_NHWC = 2,
};

/* fprep_location: where a frame or tensor lives. */
enum fprep_location {
	FPREP_LOC_INLINE = 0, /* in the message payload */
	FPREP_LOC_SHM = 1,    /* in a registered shared-memory region */
	FPREP_LOC_CUDA = 2,   /* in a registered CUDA region (device memory) */
};

/* Bit 7 of the wire's output_loc byte: the reply header is also written
 * into the output region (see "The reply in shared memory" above). Decoded
 * into fprep_request.shm_reply, never left in output_loc. */
#define FPREP_LOC_F_SHM_REPLY 0x80u

#define FPREP_CUDA_HANDLE_SIZE 64 /* bytes of a cudaIpcMemHandle_t */
#define FPREP_CUDA_UUID_SIZE   16 /* bytes of a CUDA device UUID */

/* Reply flags. INPUT_RELEASED: the shm or CUDA input may be rewritten. */
#define FPREP_REPLY_F_INPUT_RELEASED 0x1u
/* Reply flag STREAM_SKIPPED: a STREAM_PACKET was dropped, not decoded: its
 * stream waits for an IDR (H.264) or IRAP (HEVC) picture after an error. */
#define FPREP_REPLY_F_STREAM_SKIPPED 0x2u

/* Bytes of one frame record of a stream reply (see "Video streams"). */
#define FPREP_STREAM_FRAME_SIZE 32

/* fprep_limits: the bounds a daemon enforces on requests. Every size from
 * the wire is checked against these before anything is allocated. */
typedef struct fprep_limits {
	uint32_t max_width;        /* source width, pixels */
	uint32_t max_height;       /* source height, pixels */
	uint64_t max_frame_bytes;  /* source frame bytes (input_size) */
	uint32_t max_out_width;    /* tensor width, pixels */
	uint32_t max_out_height;   /* tensor height, pixels */
	uint64_t max_tensor_bytes; /* tensor bytes */
	/* ROIS and BATCH: elements of one request (0: none accepted), and
	 * the bytes of its whole tensor and of a BATCH's frames' span. */
	uint32_t max_elements;
	uint64_t max_batch_bytes; /* ROIS, BATCH: tensor and frames bytes */
	/* JPEG sources: the scans of one file (a progressive file holds
	 * about 10; every scan is a pass over the frame), and scans x
	 * pixels, the decode's work. Past either the decode stops with
	 * FPREP_ELIMIT. 0 (a daemon that does not tell): not known. */
	uint32_t max_jpeg_scans;       /* JPEG: scans of one file */
	uint64_t max_jpeg_scan_pixels; /* JPEG: scans x pixels of one file */
	/* Video streams (see "Video streams"): the bytes of one packet (and
	 * of STREAM_OPEN's parameter sets), the streams one connection and
	 * one peer uid may hold open, and the decoded frames one stream
	 * holds. The coded size is bounded by max_width, max_height and
	 * max_frame_bytes (NV12 bytes). 0 (a daemon that does not tell):
	 * no streams. */
	uint64_t max_packet_bytes;     /* STREAM_PACKET: bytes of a packet */
	uint32_t max_streams_per_conn; /* open streams of one connection */
	uint32_t max_streams_per_uid;  /* open streams of one peer uid */
	uint32_t max_stream_frames;    /* decoded frames a stream holds */
	/* Video decode sessions (streams) open at once on one GPU, whose
	 * video engines have a limit; past it STREAM_OPEN is refused with
	 * FPREP_ELIMIT. 0: not told (a CPU daemon's streams have no such
	 * bound). */
	uint32_t max_video_sessions;
} fprep_limits;

/* fprep_request: a decoded request header, in host byte order. Field
 * meanings are those of the wire table above. */
typedef struct fprep_request {
	uint16_t version;      /* FPREP_PROTOCOL_VERSION */
	uint16_t kind;         /* enum fprep_kind */
	uint64_t request_id;   /* chosen by the client, echoed in the reply */
	uint16_t src_format;   /* enum fprep_pixel_format of the frame */
	uint8_t yuv_matrix;    /* enum fprep_yuv_matrix (YUV sources) */
	uint8_t yuv_range;     /* enum fprep_yuv_range (YUV sources) */
	uint32_t src_width;    /* source width, pixels */
	uint32_t src_height;   /* source height, pixels */
	uint32_t src_stride;   /* bytes from one row (of Y) to the next */
	uint32_t out_width;    /* tensor width, pixels */
	uint32_t out_height;   /* tensor height, pixels */
	uint8_t resize;        /* enum fprep_resize */
	uint8_t channel_order; /* enum fprep_channel_order of the tensor */
	uint8_t dtype;         /* enum fprep_dtype of the tensor */
	uint8_t layout;        /* enum fprep_layout of the tensor */
	float pad_value;       /* border value, source pixel units */
	float scale;           /* multiplier of the pixel values */
	float mean[3];         /* subtracted after scaling, per channel */
	float std[3];          /* divisor after the mean, per channel */
	uint8_t input_loc;     /* enum fprep_location of the frame */
	uint8_t output_loc;    /* enum fprep_location of the tensor */
	uint16_t uv_stride;    /* NV12, I420: bytes per chroma row */
	uint32_t in_region;    /* the frame's region id, else 0 */
	uint32_t out_region;   /* the tensor's region id, else 0 */
	uint64_t in_offset;    /* the frame's offset in in_region */
	uint64_t out_offset;   /* the tensor's offset in out_region */
	uint64_t out_capacity; /* bytes available at out_offset */
	uint64_t input_size;   /* bytes of the frame */
	uint32_t u_offset;     /* NV12: UV plane, I420: U plane offset */
	uint32_t v_offset;     /* I420: V plane offset */
	uint8_t shm_reply; /* 1: FPREP_LOC_F_SHM_REPLY (wire: output_loc bit 7)
	                    */
	uint8_t rounding;  /* enum fprep_rounding (wire: resize bits 4-7) */
	/* ROIS and BATCH (decoded from the element table, not the header):
	 * N, and the bytes of input the elements read from in_offset or the
	 * payload's start (ROIS: input_size; BATCH: max_k(offset +
	 * input_size)). 0 for the other kinds. */
	uint32_t elements;
	uint64_t input_span; /* ROIS and BATCH: bytes the elements read */
} fprep_request;

/* The element table of ROIS and BATCH requests (see above): its header,
 * one record, one reply transform record, the most elements the protocol
 * allows, and the largest |coordinate| of a BOX or AFFINE. */
#define FPREP_TABLE_HEADER_SIZE 8          /* bytes of the table's header */
#define FPREP_ELEMENT_SIZE      32         /* bytes of one element record */
#define FPREP_ELEMENT_XF_SIZE   32         /* bytes of one reply transform */
#define FPREP_ELEMENTS_MAX      4096       /* the most elements of a request */
#define FPREP_ELEMENT_COORD_MAX 1048576.0f /* the largest |coordinate| */

/* fprep_element_type: what one element of a ROIS or BATCH request is. */
enum fprep_element_type {
	FPREP_ELEM_BOX = 1,    /* ROIS: a box, letterboxed or stretched */
	FPREP_ELEM_AFFINE = 2, /* ROIS: a 2x3 matrix, source <- tensor */
	FPREP_ELEM_FRAME = 3,  /* BATCH: a frame at an offset */
};

/* fprep_element: one decoded element record, in host byte order. */
typedef struct fprep_element {
	uint8_t type;    /* enum fprep_element_type */
	uint8_t resize;  /* BOX: enum fprep_resize; 0: the request's */
	float v[6];      /* BOX: x, y, w, h, 0, 0; AFFINE: m00..m12 */
	uint64_t offset; /* FRAME: bytes from in_offset or the payload */
} fprep_element;

/* fprep_element_xf: one element's transform, as the reply carries it:
 * tensor point (u, v) is source point (origin_x + (u - pad_x) / scale_x,
 * origin_y + (v - pad_y) / scale_y). All zero for an AFFINE element. */
typedef struct fprep_element_xf {
	uint32_t resized_w; /* the resized box's width in the tensor */
	uint32_t resized_h; /* the resized box's height in the tensor */
	uint32_t pad_x;     /* tensor pixels of padding on the left */
	uint32_t pad_y;     /* tensor pixels of padding on the top */
	float scale_x;      /* source pixels -> tensor pixels, x */
	float scale_y;      /* source pixels -> tensor pixels, y */
	float origin_x;     /* the box's left edge, source pixels */
	float origin_y;     /* the box's top edge, source pixels */
} fprep_element_xf;

/* fprep_register_request: a decoded REGISTER, UNREGISTER or REGISTER_CUDA
 * request (see the kinds above), in host byte order. */
typedef struct fprep_register_request {
	uint16_t version; /* FPREP_PROTOCOL_VERSION */
	uint16_t kind;    /* FPREP_KIND_REGISTER, _UNREGISTER, _REGISTER_CUDA or
	                     _DOORBELL */
	uint64_t request_id;  /* chosen by the client, echoed in the reply */
	uint64_t region_size; /* REGISTER: bytes to map; REGISTER_CUDA: of the
	                       * client's buffer */
	uint32_t region_id;   /* UNREGISTER: the region to drop; DOORBELL:
	                         the region holding the area */
	uint32_t doorbell_entries; /* DOORBELL: entries, 0: stop */
	uint64_t doorbell_offset;  /* DOORBELL: the area's offset */
	char region_name[FPREP_REGION_NAME_MAX + 1]; /* REGISTER; NUL-ended */
	/* REGISTER_CUDA: the buffer's offset from its allocation's base, the
	 * allocation's cudaIpcMemHandle_t and its device's UUID. */
	uint64_t cuda_offset;
	uint8_t cuda_handle[FPREP_CUDA_HANDLE_SIZE]; /* cudaIpcMemHandle_t */
	uint8_t cuda_uuid[FPREP_CUDA_UUID_SIZE];     /* the device's UUID */
} fprep_register_request;

/* fprep_stream_request: a decoded STREAM_PACKET, STREAM_FLUSH or
 * STREAM_CLOSE request (see "Video streams"), in host byte order. */
typedef struct fprep_stream_request {
	uint16_t version;     /* FPREP_PROTOCOL_VERSION */
	uint16_t kind;        /* FPREP_KIND_STREAM_PACKET, _FLUSH or _CLOSE */
	uint64_t request_id;  /* chosen by the client, echoed in the reply */
	uint32_t stream_id;   /* the id STREAM_OPEN gave */
	uint32_t seq;         /* its number in the stream, from 1; 0: none */
	int64_t pts;          /* PACKET: presentation time, producer's units */
	uint64_t packet_size; /* PACKET: bytes of payload; else 0 */
	/* PACKET, FLUSH: where the frames' tensors go ("Tensors in a
	 * region"): FPREP_LOC_INLINE (0: the reply's payload, the three
	 * region fields 0), FPREP_LOC_SHM or FPREP_LOC_CUDA. */
	uint8_t output_loc;
	uint32_t out_region;   /* SHM, CUDA: a region of this connection */
	uint64_t out_offset;   /* SHM, CUDA: frame 0's tensor, bytes in */
	uint64_t out_capacity; /* SHM, CUDA: bytes the tensors may fill */
} fprep_stream_request;

/* fprep_stream_frame: one frame record of a stream reply, in host byte
 * order: the pts of the frame, its decoded size and its transform. */
typedef struct fprep_stream_frame {
	int64_t pts;     /* the pts of the packet the frame came from */
	uint32_t width;  /* the decoded frame's width, pixels */
	uint32_t height; /* the decoded frame's height, pixels */
	float scale_x;   /* source pixels -> tensor pixels, x */
	float scale_y;   /* source pixels -> tensor pixels, y */
	float pad_x;     /* tensor pixels of padding on the left */
	float pad_y;     /* tensor pixels of padding on the top */
} fprep_stream_frame;

/* fprep_reply_header: a decoded reply header, in host byte order. */
typedef struct fprep_reply_header {
	uint16_t version;      /* FPREP_PROTOCOL_VERSION */
	uint16_t kind;         /* the request's kind */
	uint64_t request_id;   /* the request's id */
	uint32_t status;       /* enum fprep_err; FPREP_OK = 0 */
	uint8_t dtype;         /* enum fprep_dtype of the tensor */
	uint8_t layout;        /* enum fprep_layout of the tensor */
	uint8_t ndim;          /* entries of shape used (4 for tensors) */
	uint8_t output_loc;    /* enum fprep_location: where the tensor is */
	uint32_t shape[4];     /* NCHW (1, C, H, W) or NHWC (1, H, W, C) */
	float scale_x;         /* source pixels -> tensor pixels, x */
	float scale_y;         /* source pixels -> tensor pixels, y */
	float pad_x;           /* tensor pixels of padding on the left */
	float pad_y;           /* tensor pixels of padding on the top */
	uint32_t t_queue_us;   /* receipt to start of work, microseconds */
	uint32_t t_compute_us; /* preprocessing, microseconds */
	uint32_t t_h2d_us;     /* host-to-device copy (GPU), microseconds */
	uint32_t t_kernel_us;  /* kernel (GPU), microseconds */
	uint32_t t_d2h_us;     /* device-to-host copy (GPU), microseconds */
	uint32_t t_total_us;   /* receipt to reply, microseconds */
	uint64_t payload_size; /* bytes after the header */
	uint64_t tensor_size;  /* bytes of the tensor, wherever written */
	uint32_t region_id;    /* REGISTER, STREAM_OPEN: the new id */
	uint32_t flags;        /* FPREP_REPLY_F_* bits */
	char message[FPREP_MESSAGE_SIZE]; /* always NUL-terminated */
	uint16_t decoded_width;  /* JPEG source: decoded width, else 0 */
	uint16_t decoded_height; /* JPEG source: decoded height, else 0 */
	uint32_t t_decode_us;    /* JPEG source: decode time, else 0 */
} fprep_reply_header;

/* fprep_pixel_bytes returns the bytes per pixel of a format's rows at
 * src_stride (for NV12 and I420 those of the Y plane: 1; YUYV: 2; JPEG,
 * whose stride is ignored: 1), or 0 for an unknown format. */
FPREP_EXTERN uint32_t fprep_pixel_bytes(uint16_t format);

/* fprep_dtype_typestr returns the NumPy type string of enum fprep_dtype
 * value dtype ("<f4", "<f2", "|u1": the array interface's typestr and a
 * .npy header's descr), a static string, or NULL for an unknown dtype. */
FPREP_EXTERN const char *fprep_dtype_typestr(uint8_t dtype);

/* fprep_request_init fills *req with a FRAME request for the given source
 * and the YOLO defaults: LETTERBOX to 640x640, RGB, F32, NCHW, pad 114,
 * scale 1/255, mean 0, std 1, inline input and output, stride = width * bpp,
 * input_size = stride * height. For NV12 and I420 the planes follow each
 * other unpadded (uv_stride = width or width / 2, u_offset = stride *
 * height, I420's v_offset after the U plane) and input_size covers them;
 * the YUV matrix and range are left 0 (BT.601, limited). For JPEG the
 * stride and input_size are 0: set input_size to the file's length (the
 * size may be left 0 too: the daemon reads it from the header). */
FPREP_EXTERN void fprep_request_init(fprep_request *req, uint16_t src_format,
                                     uint32_t src_width, uint32_t src_height);

/* fprep_request_encode writes the 128-byte wire header for *req into buf
 * (which must hold FPREP_REQUEST_HEADER_SIZE bytes). It does not validate.
 * A REGISTER, UNREGISTER, REGISTER_CUDA or DOORBELL header gets only the
 * common part: use fprep_register_request_encode for those. */
FPREP_EXTERN void fprep_request_encode(const fprep_request *req, void *buf);

/* fprep_register_request_encode writes the 128-byte wire header of a
 * REGISTER, UNREGISTER, REGISTER_CUDA or DOORBELL request *req into buf
 * (which must hold
 * FPREP_REQUEST_HEADER_SIZE bytes); a name longer than
 * FPREP_REGION_NAME_MAX is cut. It does not validate. */
FPREP_EXTERN void
fprep_register_request_encode(const fprep_register_request *req, void *buf);

/* fprep_request_decode parses and validates a whole request message of len
 * bytes (header plus payload). On success returns FPREP_OK and fills *req;
 * for inline input the payload starts at FPREP_REQUEST_HEADER_SIZE.
 *
 * Validation, in this order, before anything is allocated: magic (when at
 * least 4 bytes), length >= header, version, kind; for FRAME and ECHO every
 * enum field (input_loc, output_loc and rounding included; channel_order
 * GRAY needs src_format GRAY8; for YUV formats yuv_matrix and yuv_range),
 * every dimension (1..limit) against *lim, the stride against width * bpp,
 * input_size against stride * (height - 1) + width * bpp and against
 * lim->max_frame_bytes (all in 64-bit arithmetic with overflow checks), for
 * YUV formats the even sizes, uv_stride and that each plane lies in
 * input_size, the tensor size against lim->max_tensor_bytes, the
 * payload length (== input_size for inline input, 0 for shm or CUDA
 * input), normalisation (finite values, pad_value in [0, 255], std > 0; dtype
 * U8 needs scale 1/255 or 1, mean 0, std 1), out_capacity >= tensor size for
 * shm or CUDA output. ROIS and BATCH: the FRAME checks, and first their
 * packed format and element table (N against lim->max_elements before any
 * record is read, then each record, refusals naming the element), then
 * the whole tensor and a batch's span against lim->max_batch_bytes, no
 * SHM_REPLY, the inline payload == input_size (ROIS) or the span (BATCH);
 * req->elements and req->input_span are set. INFO: only the
 * common part. REGISTER, UNREGISTER, REGISTER_CUDA and DOORBELL: the checks
 * of
 * fprep_register_request_decode, which gives their fields; the other
 * fields of *req are left zero. STREAM_OPEN: src_format a codec (H264,
 * HEVC), src_width and src_height 0, the tensor's fields as for FRAME
 * (channel_order RGB or BGR), inline input and output without SHM_REPLY,
 * input_size (the parameter sets) <= lim->max_packet_bytes and == the
 * payload's length. STREAM_PACKET, STREAM_FLUSH and STREAM_CLOSE: the
 * checks of fprep_stream_request_decode, which gives their fields.
 *
 * On failure returns the error (FPREP_EPROTO, FPREP_EVERSION, FPREP_EINVAL,
 * FPREP_ELIMIT) and, if msg is not NULL, writes a NUL-terminated sentence of
 * at most msg_size bytes naming the field, the value and the bound. Whatever
 * could be read of version, kind and request_id is still stored in *req so
 * the error reply can carry them (nothing when the magic is wrong). Never
 * reads outside buf[0..len). Thread-safe. */
FPREP_EXTERN int fprep_request_decode(const void *buf, size_t len,
                                      const fprep_limits *lim,
                                      fprep_request *req, char *msg,
                                      size_t msg_size);

/* fprep_register_request_decode parses and validates a whole REGISTER,
 * UNREGISTER, REGISTER_CUDA or DOORBELL message of len bytes: magic, length >=
 * header, version, kind (another kind: FPREP_EINVAL), for REGISTER
 * name_len in 2..FPREP_REGION_NAME_MAX with no NUL inside the name (its
 * syntax and the size are the daemon's to judge), for REGISTER_CUDA
 * region_size >= 1 and cuda_offset + region_size without 64-bit overflow
 * (the daemon checks them against the allocation), for DOORBELL entries
 * <= FPREP_DOORBELL_ENTRIES_MAX and offset a multiple of 64 (the daemon
 * checks the area against the region). Returns and explains errors
 * like fprep_request_decode, storing what could be read of version, kind and
 * request_id. Never reads outside buf[0..len). Thread-safe. */
FPREP_EXTERN int fprep_register_request_decode(const void *buf, size_t len,
                                               fprep_register_request *req,
                                               char *msg, size_t msg_size);

/* fprep_tensor_shape computes the tensor a valid request produces: shape in
 * the request's layout (4 entries; N = req->elements for ROIS and BATCH,
 * else 1) and its size in bytes. Returns 0, or
 * FPREP_EINVAL for a request that fprep_request_decode would refuse. */
FPREP_EXTERN int fprep_tensor_shape(const fprep_request *req, uint32_t shape[4],
                                    uint64_t *bytes);

/* fprep_elements_encode writes the element table of a ROIS or BATCH
 * request (FPREP_TABLE_HEADER_SIZE + n * FPREP_ELEMENT_SIZE bytes, which
 * buf must hold): the count n, then each element's record. It does not
 * validate. Thread-safe. */
FPREP_EXTERN void fprep_elements_encode(const fprep_element *elements,
                                        uint32_t n, void *buf);

/* fprep_element_get reads element k of the element table at table (the
 * bytes after a ROIS or BATCH request's header, which
 * fprep_request_decode accepted, so k < req->elements). Thread-safe. */
FPREP_EXTERN void fprep_element_get(const void *table, uint32_t k,
                                    fprep_element *el);

/* fprep_element_transform computes element el's transform for request
 * req (both decoded and valid): BOX: the letterbox (or stretch) of a
 * w x h source, fprep_transform_compute's arithmetic on the box's
 * size, origin (x, y); FRAME: the frame's transform, origin 0; AFFINE:
 * zeros. Thread-safe. */
FPREP_EXTERN void fprep_element_transform(const fprep_request *req,
                                          const fprep_element *el,
                                          fprep_element_xf *xf);

/* fprep_element_xf_encode writes *xf as its FPREP_ELEMENT_XF_SIZE-byte
 * reply record at buf. */
FPREP_EXTERN void fprep_element_xf_encode(const fprep_element_xf *xf,
                                          void *buf);
/* fprep_element_xf_decode reads one FPREP_ELEMENT_XF_SIZE-byte reply
 * record at buf into *xf. */
FPREP_EXTERN void fprep_element_xf_decode(const void *buf,
                                          fprep_element_xf *xf);

/* fprep_stream_request_init fills *req with a STREAM_OPEN request for
 * codec (FPREP_PIX_H264 or FPREP_PIX_HEVC) with fprep_request_init's
 * defaults for the tensor (LETTERBOX to 640x640, RGB, F32, NCHW, pad 114,
 * scale 1/255) and no parameter sets (input_size 0). */
FPREP_EXTERN void fprep_stream_request_init(fprep_request *req, uint16_t codec);

/* fprep_stream_request_encode writes the 128-byte wire header of a
 * STREAM_PACKET, STREAM_FLUSH or STREAM_CLOSE request *req into buf
 * (which must hold FPREP_REQUEST_HEADER_SIZE bytes). It does not
 * validate. A STREAM_OPEN is a FRAME-like header:
 * fprep_request_encode writes it. */
FPREP_EXTERN void fprep_stream_request_encode(const fprep_stream_request *req,
                                              void *buf);

/* fprep_stream_request_decode parses and validates a whole STREAM_PACKET,
 * STREAM_FLUSH or STREAM_CLOSE message of len bytes: magic, length >=
 * header, version, kind (another kind: FPREP_EINVAL), stream_id != 0,
 * packet_size == the payload's length, for PACKET 1..lim->max_packet_bytes
 * (FPREP_ELIMIT past it), for FLUSH and CLOSE 0 and pts 0. Returns and
 * explains errors like fprep_request_decode, storing what could be read of
 * version, kind and request_id. The packet, if any, starts at
 * FPREP_REQUEST_HEADER_SIZE. Never reads outside buf[0..len).
 * Thread-safe. */
FPREP_EXTERN int fprep_stream_request_decode(const void *buf, size_t len,
                                             const fprep_limits *lim,
                                             fprep_stream_request *req,
                                             char *msg, size_t msg_size);

/* fprep_stream_frame_encode writes *f as its FPREP_STREAM_FRAME_SIZE-byte
 * reply record at buf. Thread-safe. */
FPREP_EXTERN void fprep_stream_frame_encode(const fprep_stream_frame *f,
                                            void *buf);
/* fprep_stream_frame_decode reads one FPREP_STREAM_FRAME_SIZE-byte reply
 * record at buf into *f. Thread-safe. */
FPREP_EXTERN void fprep_stream_frame_decode(const void *buf,
                                            fprep_stream_frame *f);

/* fprep_request_payload_offset returns where a decoded request's inline
 * payload starts in its message: FPREP_REQUEST_HEADER_SIZE, plus the
 * element table of a ROIS or BATCH request. */
FPREP_EXTERN size_t fprep_request_payload_offset(const fprep_request *req);

/* fprep_reply_encode writes the 256-byte wire header for *rep into buf. */
FPREP_EXTERN void fprep_reply_encode(const fprep_reply_header *rep, void *buf);

/* fprep_reply_decode parses a reply message of len bytes: magic, version,
 * payload_size == len - header, message NUL-terminated, ndim <= 4; and for
 * a FRAME, ECHO, ROIS or BATCH reply with status FPREP_OK: ndim 4, known
 * dtype and layout, shape product * element size == tensor_size, and
 * payload_size == tensor_size for inline output (ROIS, BATCH: plus
 * shape[0] transform records, the whole payload for region output;
 * STREAM_PACKET, STREAM_FLUSH: shape[0] may be 0, and the payload is the
 * tensor plus shape[0] frame records).
 * Returns FPREP_OK or FPREP_EPROTO /
 * FPREP_EVERSION; on failure kind and request_id are still filled as far
 * as they could be read (nothing when the magic is wrong). The payload, if
 * any, starts at FPREP_REPLY_HEADER_SIZE. */
FPREP_EXTERN int fprep_reply_decode(const void *buf, size_t len,
                                    fprep_reply_header *rep);

#ifdef __cplusplus
}
#endif

#endif /* FRAMEPREP_PROTOCOL_H */
