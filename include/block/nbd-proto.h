/*
 * The NBD wire protocol: constants and on-the-wire structures, written
 * from the public protocol description (NetworkBlockDevice/nbd,
 * doc/proto.md).  Shared by the server (block/export/) and by the small
 * client that `qblock-nbd --list` uses.
 *
 * Everything on the wire is big-endian.  The structures below are the
 * fixed-size parts of messages, packed, with static asserts on their
 * sizes; variable parts (names, payloads) follow them on the wire.  Only
 * the fixed newstyle handshake is described: oldstyle and plain newstyle
 * are obsolete and every client in use speaks fixed newstyle.
 */
#ifndef QBLOCK_NBD_PROTO_H
#define QBLOCK_NBD_PROTO_H

#include "util/osdep.h"

/* ---- handshake ---- */

#define NBD_INIT_MAGIC          UINT64_C(0x4e42444d41474943) /* "NBDMAGIC" */
#define NBD_OPTS_MAGIC          UINT64_C(0x49484156454f5054) /* "IHAVEOPT" */
#define NBD_REP_MAGIC           UINT64_C(0x0003e889045565a9)

/* Handshake flags (server, 16 bits). */
#define NBD_FLAG_FIXED_NEWSTYLE (1 << 0)
#define NBD_FLAG_NO_ZEROES      (1 << 1)

/* Client flags (32 bits). */
#define NBD_FLAG_C_FIXED_NEWSTYLE (1 << 0)
#define NBD_FLAG_C_NO_ZEROES      (1 << 1)

/* Transmission flags (16 bits), sent with the export's size. */
#define NBD_FLAG_HAS_FLAGS          (1 << 0)
#define NBD_FLAG_READ_ONLY          (1 << 1)
#define NBD_FLAG_SEND_FLUSH         (1 << 2)
#define NBD_FLAG_SEND_FUA           (1 << 3)
#define NBD_FLAG_ROTATIONAL         (1 << 4)
#define NBD_FLAG_SEND_TRIM          (1 << 5)
#define NBD_FLAG_SEND_WRITE_ZEROES  (1 << 6)
#define NBD_FLAG_SEND_DF            (1 << 7)
#define NBD_FLAG_CAN_MULTI_CONN     (1 << 8)
#define NBD_FLAG_SEND_RESIZE        (1 << 9)
#define NBD_FLAG_SEND_CACHE         (1 << 10)
#define NBD_FLAG_SEND_FAST_ZERO     (1 << 11)

/* Options. */
#define NBD_OPT_EXPORT_NAME         1
#define NBD_OPT_ABORT               2
#define NBD_OPT_LIST                3
#define NBD_OPT_STARTTLS            5
#define NBD_OPT_INFO                6
#define NBD_OPT_GO                  7
#define NBD_OPT_STRUCTURED_REPLY    8
#define NBD_OPT_LIST_META_CONTEXT   9
#define NBD_OPT_SET_META_CONTEXT    10

/* Option reply types; errors have bit 31 set. */
#define NBD_REP_ACK                 1
#define NBD_REP_SERVER              2
#define NBD_REP_INFO                3
#define NBD_REP_META_CONTEXT        4
#define NBD_REP_FLAG_ERROR          (UINT32_C(1) << 31)
#define NBD_REP_ERR_UNSUP           (NBD_REP_FLAG_ERROR | 1)
#define NBD_REP_ERR_POLICY          (NBD_REP_FLAG_ERROR | 2)
#define NBD_REP_ERR_INVALID         (NBD_REP_FLAG_ERROR | 3)
#define NBD_REP_ERR_PLATFORM        (NBD_REP_FLAG_ERROR | 4)
#define NBD_REP_ERR_TLS_REQD        (NBD_REP_FLAG_ERROR | 5)
#define NBD_REP_ERR_UNKNOWN         (NBD_REP_FLAG_ERROR | 6)
#define NBD_REP_ERR_SHUTDOWN        (NBD_REP_FLAG_ERROR | 7)
#define NBD_REP_ERR_BLOCK_SIZE_REQD (NBD_REP_FLAG_ERROR | 8)
#define NBD_REP_ERR_TOO_BIG         (NBD_REP_FLAG_ERROR | 9)

/* Information types of NBD_OPT_INFO / NBD_OPT_GO. */
#define NBD_INFO_EXPORT             0
#define NBD_INFO_NAME               1
#define NBD_INFO_DESCRIPTION        2
#define NBD_INFO_BLOCK_SIZE         3

/*
 * Export names, descriptions and meta context names are at most this long
 * (the protocol's limit on strings).
 */
#define NBD_MAX_STRING_SIZE         4096

/* Meta context names this server offers. */
#define NBD_META_NS_BASE            "base"
#define NBD_META_NS_QEMU            "qemu"
#define NBD_META_BASE_ALLOCATION    "base:allocation"
#define NBD_META_QEMU_ALLOC_DEPTH   "qemu:allocation-depth"
#define NBD_META_QEMU_DIRTY_BITMAP  "qemu:dirty-bitmap:"

/* Flags of a base:allocation extent. */
#define NBD_STATE_HOLE              (1 << 0)
#define NBD_STATE_ZERO              (1 << 1)
/* qemu:dirty-bitmap:NAME: the extent is dirty in the bitmap */
#define NBD_STATE_DIRTY             (1 << 0)

/* The server's greeting: magic, option magic, handshake flags. */
typedef struct QEMU_PACKED NBDNewstyleGreeting {
    uint64_t magic;             /* NBD_INIT_MAGIC */
    uint64_t opts_magic;        /* NBD_OPTS_MAGIC */
    uint16_t flags;             /* NBD_FLAG_FIXED_NEWSTYLE | NO_ZEROES */
} NBDNewstyleGreeting;

/* An option from the client; @length bytes of data follow. */
typedef struct QEMU_PACKED NBDOption {
    uint64_t magic;             /* NBD_OPTS_MAGIC */
    uint32_t option;            /* NBD_OPT_* */
    uint32_t length;
} NBDOption;

/* The server's reply to an option; @length bytes of data follow. */
typedef struct QEMU_PACKED NBDOptionReply {
    uint64_t magic;             /* NBD_REP_MAGIC */
    uint32_t option;            /* the option answered */
    uint32_t type;              /* NBD_REP_* */
    uint32_t length;
} NBDOptionReply;

/*
 * The oldstyle greeting, after the two magics: no options, one export.
 * Its 32 flag bits hold the transmission flags in the low half.
 */
#define NBD_OLDSTYLE_MAGIC          UINT64_C(0x00420281861253)
typedef struct QEMU_PACKED NBDOldstyleGreeting {
    uint64_t size;
    uint32_t flags;
    uint8_t zeroes[124];
} NBDOldstyleGreeting;

/* NBD_INFO_EXPORT, and the tail of the NBD_OPT_EXPORT_NAME answer. */
typedef struct QEMU_PACKED NBDInfoExport {
    uint16_t info;              /* NBD_INFO_EXPORT */
    uint64_t size;
    uint16_t flags;             /* transmission flags */
} NBDInfoExport;

typedef struct QEMU_PACKED NBDInfoBlockSize {
    uint16_t info;              /* NBD_INFO_BLOCK_SIZE */
    uint32_t minimum;
    uint32_t preferred;
    uint32_t maximum;
} NBDInfoBlockSize;

/* Zeroes that end the NBD_OPT_EXPORT_NAME answer without NO_ZEROES. */
#define NBD_EXPORT_NAME_PADDING     124

/* ---- transmission ---- */

#define NBD_REQUEST_MAGIC           UINT32_C(0x25609513)
#define NBD_SIMPLE_REPLY_MAGIC      UINT32_C(0x67446698)
#define NBD_STRUCTURED_REPLY_MAGIC  UINT32_C(0x668e33ef)

/* Commands. */
#define NBD_CMD_READ                0
#define NBD_CMD_WRITE               1
#define NBD_CMD_DISC                2
#define NBD_CMD_FLUSH               3
#define NBD_CMD_TRIM                4
#define NBD_CMD_CACHE               5
#define NBD_CMD_WRITE_ZEROES        6
#define NBD_CMD_BLOCK_STATUS        7

/* Command flags. */
#define NBD_CMD_FLAG_FUA            (1 << 0)
#define NBD_CMD_FLAG_NO_HOLE        (1 << 1)
#define NBD_CMD_FLAG_DF             (1 << 2)
#define NBD_CMD_FLAG_REQ_ONE        (1 << 3)
#define NBD_CMD_FLAG_FAST_ZERO      (1 << 4)

/* Structured reply chunk flags and types; error types have bit 15 set. */
#define NBD_REPLY_FLAG_DONE         (1 << 0)
#define NBD_REPLY_TYPE_NONE         0
#define NBD_REPLY_TYPE_OFFSET_DATA  1
#define NBD_REPLY_TYPE_OFFSET_HOLE  2
#define NBD_REPLY_TYPE_BLOCK_STATUS 5
#define NBD_REPLY_TYPE_ERROR        ((1 << 15) | 1)
#define NBD_REPLY_TYPE_ERROR_OFFSET ((1 << 15) | 2)

/* Error values of replies (errno values of the protocol, not the host). */
#define NBD_SUCCESS                 0
#define NBD_EPERM                   1
#define NBD_EIO                     5
#define NBD_ENOMEM                  12
#define NBD_EINVAL                  22
#define NBD_ENOSPC                  28
#define NBD_EOVERFLOW               75
#define NBD_ENOTSUP                 95
#define NBD_ESHUTDOWN               108

typedef struct QEMU_PACKED NBDRequestHeader {
    uint32_t magic;             /* NBD_REQUEST_MAGIC */
    uint16_t flags;             /* NBD_CMD_FLAG_* */
    uint16_t type;              /* NBD_CMD_* */
    uint64_t cookie;            /* echoed in the reply */
    uint64_t offset;
    uint32_t length;
} NBDRequestHeader;

typedef struct QEMU_PACKED NBDSimpleReply {
    uint32_t magic;             /* NBD_SIMPLE_REPLY_MAGIC */
    uint32_t error;             /* NBD_E* */
    uint64_t cookie;
} NBDSimpleReply;

/* One chunk of a structured reply; @length bytes of payload follow. */
typedef struct QEMU_PACKED NBDStructuredReplyChunk {
    uint32_t magic;             /* NBD_STRUCTURED_REPLY_MAGIC */
    uint16_t flags;             /* NBD_REPLY_FLAG_DONE */
    uint16_t type;              /* NBD_REPLY_TYPE_* */
    uint64_t cookie;
    uint32_t length;
} NBDStructuredReplyChunk;

/* Payload of NBD_REPLY_TYPE_OFFSET_HOLE. */
typedef struct QEMU_PACKED NBDReplyOffsetHole {
    uint64_t offset;
    uint32_t length;
} NBDReplyOffsetHole;

/* Payload head of NBD_REPLY_TYPE_ERROR; a message of @message_length
 * bytes (not NUL-terminated) follows. */
typedef struct QEMU_PACKED NBDReplyError {
    uint32_t error;
    uint16_t message_length;
} NBDReplyError;

/* Payload of NBD_REPLY_TYPE_BLOCK_STATUS: the context id, then extents. */
typedef struct QEMU_PACKED NBDBlockStatusExtent {
    uint32_t length;
    uint32_t flags;
} NBDBlockStatusExtent;

/*
 * The sizes the protocol fixes; a compiler that pads any of these would
 * put garbage on the wire.
 */
_Static_assert(sizeof(NBDNewstyleGreeting) == 18, "greeting is 18 bytes");
_Static_assert(sizeof(NBDOldstyleGreeting) == 136,
               "oldstyle greeting after the magics is 136 bytes");
_Static_assert(sizeof(NBDOption) == 16, "option header is 16 bytes");
_Static_assert(sizeof(NBDOptionReply) == 20, "option reply is 20 bytes");
_Static_assert(sizeof(NBDInfoExport) == 12, "NBD_INFO_EXPORT is 12 bytes");
_Static_assert(sizeof(NBDInfoBlockSize) == 14,
               "NBD_INFO_BLOCK_SIZE is 14 bytes");
_Static_assert(sizeof(NBDRequestHeader) == 28, "request is 28 bytes");
_Static_assert(sizeof(NBDSimpleReply) == 16, "simple reply is 16 bytes");
_Static_assert(sizeof(NBDStructuredReplyChunk) == 20,
               "structured reply chunk header is 20 bytes");
_Static_assert(sizeof(NBDReplyOffsetHole) == 12, "hole chunk is 12 bytes");
_Static_assert(sizeof(NBDReplyError) == 6, "error chunk head is 6 bytes");
_Static_assert(sizeof(NBDBlockStatusExtent) == 8, "extent is 8 bytes");

/* Names for messages and traces ("NBD_OPT_GO", "NBD_CMD_READ", ...). */
const char *nbd_opt_name(uint32_t opt);
const char *nbd_cmd_name(uint16_t cmd);
const char *nbd_rep_name(uint32_t rep);
/* Maps a negative errno from the block layer to an NBD_E* value. */
uint32_t nbd_errno_to_wire(int err);

#endif
