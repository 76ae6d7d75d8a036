/*
 * protocol_wire.h: the byte access and the field tables that the codec's
 * files (protocol.c: FRAME, REGISTER and reply headers; protocol_stream.c:
 * the stream messages) share.
 *
 * Every field is read and written byte by byte at its documented offset in
 * little-endian order: a received nng body is only 4-byte aligned and the
 * host may be of either byte order, so wire bytes are never cast to
 * structs. Private to src/lib.
 */
#ifndef FPREP_LIB_PROTOCOL_WIRE_H
#define FPREP_LIB_PROTOCOL_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fail.h"
#include "frameprep/frameprep.h"
#include "frameprep/protocol.h"

/* Little-endian field access at byte offsets. */
static inline uint16_t proto_get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (uint16_t)p[1] << 8);
}

static inline uint32_t proto_get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline uint64_t proto_get64(const uint8_t *p)
{
	return (uint64_t)proto_get32(p) | (uint64_t)proto_get32(p + 4) << 32;
}

static inline float proto_getf(const uint8_t *p)
{
	uint32_t u = proto_get32(p);
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

static inline void proto_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void proto_put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static inline void proto_put64(uint8_t *p, uint64_t v)
{
	proto_put32(p, (uint32_t)v);
	proto_put32(p + 4, (uint32_t)(v >> 32));
}

static inline void proto_putf(uint8_t *p, float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	proto_put32(p, u);
}

static inline void proto_putf_array(uint8_t *p, const float *v, int n)
{
	for (int i = 0; i < n; i++)
		proto_putf(p + 4 * i, v[i]);
}

static inline void proto_getf_array(const uint8_t *p, float *v, int n)
{
	for (int i = 0; i < n; i++)
		v[i] = proto_getf(p + 4 * i);
}

static inline void proto_put32_array(uint8_t *p, const uint32_t *v, int n)
{
	for (int i = 0; i < n; i++)
		proto_put32(p + 4 * i, v[i]);
}

static inline void proto_get32_array(const uint8_t *p, uint32_t *v, int n)
{
	for (int i = 0; i < n; i++)
		v[i] = proto_get32(p + 4 * i);
}

/* proto_put_text writes the text in a field of size bytes up to its NUL,
 * cut to size - 1 bytes; the field must already be zero. */
static inline void proto_put_text(uint8_t *p, const char *text, size_t size)
{
	memcpy(p, text, strnlen(text, size - 1));
}

/*
 * The wire tables. Each header is a list of fields (offset, type, name) and
 * reserved spans R(offset, bytes), in the order and at the offsets of the
 * tables in protocol.h. The encoder and decoder are generated from them, and
 * so are compile-time checks that every field starts where its offset says
 * (no gap, no overlap), that the host field has the wire size, and that
 * FRAME and reply headers end exactly at their header size. The magic at
 * offset 0 is not listed: it is written first and checked before anything
 * else is read.
 */

/* The common part of every request and every reply. */
#define PROTO_HEAD(X, R)                                                       \
	X(4, u16, version)                                                     \
	X(6, u16, kind)                                                        \
	X(8, u64, request_id)

/* The wire types: size in bytes, how a host value is written at p and how
 * it is read from p. Text is NUL-padded; its last byte is always written
 * as NUL, and a received one is checked by the decoder. */
#define PROTO_SIZE_u8      1
#define PROTO_SIZE_u16     2
#define PROTO_SIZE_u32     4
#define PROTO_SIZE_u64     8
#define PROTO_SIZE_i64     8
#define PROTO_SIZE_f32     4
#define PROTO_SIZE_f32x3   12
#define PROTO_SIZE_u32x4   16
#define PROTO_SIZE_u8x16   16
#define PROTO_SIZE_u8x64   64
#define PROTO_SIZE_char64  64
#define PROTO_SIZE_char144 144

#define PROTO_PUT_u8(p, v)      ((p)[0] = (v))
#define PROTO_PUT_u16(p, v)     proto_put16(p, v)
#define PROTO_PUT_u32(p, v)     proto_put32(p, v)
#define PROTO_PUT_u64(p, v)     proto_put64(p, v)
#define PROTO_PUT_i64(p, v)     proto_put64(p, (uint64_t)(v))
#define PROTO_PUT_f32(p, v)     proto_putf(p, v)
#define PROTO_PUT_f32x3(p, v)   proto_putf_array(p, v, 3)
#define PROTO_PUT_u32x4(p, v)   proto_put32_array(p, v, 4)
#define PROTO_PUT_u8x16(p, v)   memcpy(p, v, 16)
#define PROTO_PUT_u8x64(p, v)   memcpy(p, v, 64)
#define PROTO_PUT_char64(p, v)  proto_put_text(p, v, sizeof(v))
#define PROTO_PUT_char144(p, v) proto_put_text(p, v, sizeof(v))

#define PROTO_GET_u8(p, v)      ((v) = (p)[0])
#define PROTO_GET_u16(p, v)     ((v) = proto_get16(p))
#define PROTO_GET_u32(p, v)     ((v) = proto_get32(p))
#define PROTO_GET_u64(p, v)     ((v) = proto_get64(p))
#define PROTO_GET_i64(p, v)     ((v) = (int64_t)proto_get64(p))
#define PROTO_GET_f32(p, v)     ((v) = proto_getf(p))
#define PROTO_GET_f32x3(p, v)   proto_getf_array(p, v, 3)
#define PROTO_GET_u32x4(p, v)   proto_get32_array(p, v, 4)
#define PROTO_GET_u8x16(p, v)   memcpy(v, p, 16)
#define PROTO_GET_u8x64(p, v)   memcpy(v, p, 64)
#define PROTO_GET_char64(p, v)  memcpy(v, p, sizeof(v))
#define PROTO_GET_char144(p, v) memcpy(v, p, sizeof(v))

/* Generators: a table expanded with these writes the fields of *obj at p,
 * reads them, or reads those that lie inside len bytes. */
#define PROTO_SKIP(off, bytes)
#define PROTO_ENCODE(off, type, field) PROTO_PUT_##type(p + (off), obj->field);
#define PROTO_DECODE(off, type, field) PROTO_GET_##type(p + (off), obj->field);
#define PROTO_DECODE_IN(off, type, field)                                      \
	if (len >= (off) + PROTO_SIZE_##type)                                  \
		PROTO_GET_##type(p + (off), obj->field);

/* Layout checks: a struct of byte arrays, one per field and reserved span,
 * has no padding, so each field's offset in it is the sum of the sizes
 * before it. */
#define PROTO_LAYOUT(off, type, field) uint8_t field[PROTO_SIZE_##type];
#define PROTO_LAYOUT_R(off, bytes)     uint8_t reserved_##off[bytes];
#define PROTO_CHECK(layout, host, off, type, field)                            \
	_Static_assert(offsetof(struct layout, field) == (off),                \
	               #field " is not at offset " #off);                      \
	_Static_assert(sizeof(((host *)0)->field) == PROTO_SIZE_##type,        \
	               #field " does not hold a " #type);

/* proto_head: the common part of a request, as the table names it. */
struct proto_head {
	uint16_t version;
	uint16_t kind;
	uint64_t request_id;
};

/* proto_head_encode zeroes the header of size bytes at p and writes its
 * magic and common part. */
static inline void proto_head_encode(uint8_t *p, size_t size, uint32_t magic,
                                     uint16_t version, uint16_t kind,
                                     uint64_t request_id)
{
	struct proto_head head = {version, kind, request_id}, *obj = &head;

	memset(p, 0, size);
	proto_put32(p, magic);
	PROTO_HEAD(PROTO_ENCODE, PROTO_SKIP)
}

/* proto_read_head reads a request's magic and common part (as much of it
 * as len holds, into the three fields given) and checks the header length
 * and the version. */
static inline int proto_read_head(const uint8_t *p, size_t len,
                                  uint16_t *version, uint16_t *kind,
                                  uint64_t *request_id, char *msg,
                                  size_t msg_size)
{
	struct proto_head head = {0}, *obj = &head;
	uint32_t magic;
	int err = FPREP_OK;

	if (msg != NULL && msg_size > 0)
		msg[0] = '\0';
	if (len >= 4) {
		magic = proto_get32(p);
		if (magic != FPREP_REQUEST_MAGIC)
			return fprep__fail(msg, msg_size, FPREP_EPROTO,
			                   "magic 0x%08x != 0x%08x", magic,
			                   FPREP_REQUEST_MAGIC);
	}
	PROTO_HEAD(PROTO_DECODE_IN, PROTO_SKIP)
	*version = head.version;
	*kind = head.kind;
	*request_id = head.request_id;
	if (len < FPREP_REQUEST_HEADER_SIZE)
		err = fprep__fail(msg, msg_size, FPREP_EPROTO,
		                  "message length %zu < header size %d", len,
		                  FPREP_REQUEST_HEADER_SIZE);
	else if (head.version != FPREP_PROTOCOL_VERSION)
		err = fprep__fail(msg, msg_size, FPREP_EVERSION,
		                  "version %u != %d", head.version,
		                  FPREP_PROTOCOL_VERSION);
	return err;
}

#endif /* FPREP_LIB_PROTOCOL_WIRE_H */
