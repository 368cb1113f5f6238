/*
 * The vhost-user protocol on the wire: message header, requests, feature
 * bits and payloads, as the vhost-user specification defines them
 * (QEMU's docs/interop/vhost-user.rst).  All fields are in the host's
 * byte order: both ends run on the same machine.
 *
 * A message is a 12-byte header followed by `size` bytes of payload; file
 * descriptors travel as SCM_RIGHTS ancillary data with the message.  The
 * front-end (QEMU) sends requests; the back-end (the vhost-user-blk
 * export) replies to those that have a reply, and to the others when
 * REPLY_ACK is negotiated and the front-end set NEED_REPLY.
 *
 * Shared by the back-end (block/export/) and the test front-end
 * (tests/unit/test-vhost-user-blk.c), so that both speak from one
 * definition.
 */
#ifndef QBLOCK_VHOST_USER_PROTO_H
#define QBLOCK_VHOST_USER_PROTO_H

#include "util/osdep.h"

/* Header flags: the version in bits 0-1, then REPLY and NEED_REPLY. */
#define VHOST_USER_VERSION          0x1
#define VHOST_USER_VERSION_MASK     0x3
#define VHOST_USER_REPLY_MASK       (1u << 2)
#define VHOST_USER_NEED_REPLY_MASK  (1u << 3)

typedef enum VhostUserRequest {
    VHOST_USER_NONE = 0,
    VHOST_USER_GET_FEATURES = 1,
    VHOST_USER_SET_FEATURES = 2,
    VHOST_USER_SET_OWNER = 3,
    VHOST_USER_RESET_OWNER = 4,
    VHOST_USER_SET_MEM_TABLE = 5,
    VHOST_USER_SET_LOG_BASE = 6,
    VHOST_USER_SET_LOG_FD = 7,
    VHOST_USER_SET_VRING_NUM = 8,
    VHOST_USER_SET_VRING_ADDR = 9,
    VHOST_USER_SET_VRING_BASE = 10,
    VHOST_USER_GET_VRING_BASE = 11,
    VHOST_USER_SET_VRING_KICK = 12,
    VHOST_USER_SET_VRING_CALL = 13,
    VHOST_USER_SET_VRING_ERR = 14,
    VHOST_USER_GET_PROTOCOL_FEATURES = 15,
    VHOST_USER_SET_PROTOCOL_FEATURES = 16,
    VHOST_USER_GET_QUEUE_NUM = 17,
    VHOST_USER_SET_VRING_ENABLE = 18,
    VHOST_USER_SEND_RARP = 19,
    VHOST_USER_NET_SET_MTU = 20,
    VHOST_USER_SET_BACKEND_REQ_FD = 21,
    VHOST_USER_IOTLB_MSG = 22,
    VHOST_USER_SET_VRING_ENDIAN = 23,
    VHOST_USER_GET_CONFIG = 24,
    VHOST_USER_SET_CONFIG = 25,
    VHOST_USER_CREATE_CRYPTO_SESSION = 26,
    VHOST_USER_CLOSE_CRYPTO_SESSION = 27,
    VHOST_USER_POSTCOPY_ADVISE = 28,
    VHOST_USER_POSTCOPY_LISTEN = 29,
    VHOST_USER_POSTCOPY_END = 30,
    VHOST_USER_GET_INFLIGHT_FD = 31,
    VHOST_USER_SET_INFLIGHT_FD = 32,
    VHOST_USER_GPU_SET_SOCKET = 33,
    VHOST_USER_RESET_DEVICE = 34,
    VHOST_USER_VRING_KICK = 35,
    VHOST_USER_GET_MAX_MEM_SLOTS = 36,
    VHOST_USER_ADD_MEM_REG = 37,
    VHOST_USER_REM_MEM_REG = 38,
    VHOST_USER_SET_STATUS = 39,
    VHOST_USER_GET_STATUS = 40,
    VHOST_USER_MAX_REQUEST,
} VhostUserRequest;

/*
 * Requests the back-end sends on the channel the front-end gave it with
 * SET_BACKEND_REQ_FD (when BACKEND_REQ is negotiated).
 */
typedef enum VhostUserBackendRequest {
    VHOST_USER_BACKEND_IOTLB_MSG = 1,
    /* the configuration space changed: read it again (no payload) */
    VHOST_USER_BACKEND_CONFIG_CHANGE_MSG = 2,
} VhostUserBackendRequest;

/*
 * Virtio feature bit 26, offered in GET_FEATURES: the back-end marks its
 * writes to guest memory in the dirty log the front-end gives it with
 * SET_LOG_BASE (include/virtio/vhost-log.h), so that the guest can be
 * migrated live.
 */
#define VHOST_F_LOG_ALL 26

/*
 * Virtio feature bit 30, offered in GET_FEATURES: the back-end speaks the
 * protocol-feature messages (GET/SET_PROTOCOL_FEATURES, SET_VRING_ENABLE).
 */
#define VHOST_USER_F_PROTOCOL_FEATURES 30

/* Protocol feature bits (GET/SET_PROTOCOL_FEATURES). */
#define VHOST_USER_PROTOCOL_F_MQ                    0
#define VHOST_USER_PROTOCOL_F_LOG_SHMFD             1
#define VHOST_USER_PROTOCOL_F_RARP                  2
#define VHOST_USER_PROTOCOL_F_REPLY_ACK             3
#define VHOST_USER_PROTOCOL_F_NET_MTU               4
#define VHOST_USER_PROTOCOL_F_BACKEND_REQ           5
#define VHOST_USER_PROTOCOL_F_CROSS_ENDIAN          6
#define VHOST_USER_PROTOCOL_F_CRYPTO_SESSION        7
#define VHOST_USER_PROTOCOL_F_PAGEFAULT             8
#define VHOST_USER_PROTOCOL_F_CONFIG                9
#define VHOST_USER_PROTOCOL_F_BACKEND_SEND_FD       10
#define VHOST_USER_PROTOCOL_F_HOST_NOTIFIER         11
#define VHOST_USER_PROTOCOL_F_INFLIGHT_SHMFD        12
#define VHOST_USER_PROTOCOL_F_RESET_DEVICE          13
#define VHOST_USER_PROTOCOL_F_INBAND_NOTIFICATIONS  14
#define VHOST_USER_PROTOCOL_F_CONFIGURE_MEM_SLOTS   15
#define VHOST_USER_PROTOCOL_F_STATUS                16

typedef struct VhostUserHeader {
    uint32_t request;           /* VhostUserRequest */
    uint32_t flags;             /* version, REPLY, NEED_REPLY */
    uint32_t size;              /* bytes of payload that follow */
} VhostUserHeader;
_Static_assert(sizeof(VhostUserHeader) == 12, "the header is 12 bytes");

/* SET_VRING_NUM, SET_VRING_BASE, GET_VRING_BASE, SET_VRING_ENABLE. */
typedef struct VhostUserVringState {
    uint32_t index;
    uint32_t num;
} VhostUserVringState;
_Static_assert(sizeof(VhostUserVringState) == 8, "a vring state is 8 bytes");

/*
 * SET_VRING_ADDR: the rings as addresses in the front-end's own address
 * space (the userspace_addr of the memory regions), not guest-physical.
 */
typedef struct VhostUserVringAddr {
    uint32_t index;
    uint32_t flags;             /* VHOST_VRING_F_LOG */
    uint64_t desc_user_addr;
    uint64_t used_user_addr;
    uint64_t avail_user_addr;
    uint64_t log_guest_addr;
} VhostUserVringAddr;
_Static_assert(sizeof(VhostUserVringAddr) == 40, "a vring address is 40 "
               "bytes");
_Static_assert(offsetof(VhostUserVringAddr, used_user_addr) == 16,
               "the used ring comes before the available ring");
#define VHOST_VRING_F_LOG 0

/*
 * The u64 of SET_VRING_KICK/CALL/ERR: the vring index in bits 0-7, and
 * bit 8 set when no file descriptor comes with the message.
 */
#define VHOST_USER_VRING_IDX_MASK  0xffu
#define VHOST_USER_VRING_NOFD_MASK (1u << 8)

/*
 * SET_MEM_TABLE: the guest's RAM as regions, each backed by the file
 * descriptor at the same position in the message's ancillary data;
 * region i's guest-physical range [guest_phys_addr, +memory_size) is the
 * bytes [mmap_offset, +memory_size) of fd i, and the front-end sees it at
 * userspace_addr.
 */
#define VHOST_MEMORY_BASELINE_NREGIONS 8

typedef struct VhostUserMemoryRegion {
    uint64_t guest_phys_addr;
    uint64_t memory_size;
    uint64_t userspace_addr;
    uint64_t mmap_offset;
} VhostUserMemoryRegion;
_Static_assert(sizeof(VhostUserMemoryRegion) == 32, "a region is 32 bytes");

typedef struct VhostUserMemory {
    uint32_t nregions;
    uint32_t padding;
    VhostUserMemoryRegion regions[VHOST_MEMORY_BASELINE_NREGIONS];
} VhostUserMemory;
_Static_assert(offsetof(VhostUserMemory, regions) == 8,
               "the regions follow 8 bytes of count and padding");

/*
 * GET_CONFIG and SET_CONFIG: @size bytes of the device's configuration
 * space at @offset.  The front-end sends GET_CONFIG with @size bytes of
 * (ignored) payload; the reply carries the bytes.
 */
#define VHOST_USER_MAX_CONFIG_SIZE 256
#define VHOST_SET_CONFIG_TYPE_FRONTEND  0
#define VHOST_SET_CONFIG_TYPE_MIGRATION 1

typedef struct VhostUserConfig {
    uint32_t offset;
    uint32_t size;
    uint32_t flags;             /* SET_CONFIG: VHOST_SET_CONFIG_TYPE_* */
    uint8_t region[VHOST_USER_MAX_CONFIG_SIZE];
} VhostUserConfig;
#define VHOST_USER_CONFIG_HDR_SIZE offsetof(VhostUserConfig, region)
_Static_assert(VHOST_USER_CONFIG_HDR_SIZE == 12, "config header is 12 bytes");

/*
 * SET_LOG_BASE (with LOG_SHMFD): the dirty log is bytes [mmap_offset,
 * +mmap_size) of the file descriptor the message carries.  The back-end
 * replies (any payload; a u64 0 here) once it logs into the new one.
 */
typedef struct VhostUserLog {
    uint64_t mmap_size;
    uint64_t mmap_offset;
} VhostUserLog;
_Static_assert(sizeof(VhostUserLog) == 16, "a log is 16 bytes");

/*
 * ADD_MEM_REG and REM_MEM_REG (with CONFIGURE_MEM_SLOTS): one region of
 * guest memory added, with its file descriptor, or removed (QEMU sends
 * the descriptor then too); GET_MAX_MEM_SLOTS says how many the
 * back-end holds at once.
 */
typedef struct VhostUserMemRegMsg {
    uint64_t padding;
    VhostUserMemoryRegion region;
} VhostUserMemRegMsg;
_Static_assert(sizeof(VhostUserMemRegMsg) == 40, "a region message is 40 "
               "bytes");

/*
 * GET_INFLIGHT_FD and SET_INFLIGHT_FD (with INFLIGHT_SHMFD): the shared
 * buffer where the back-end tracks the requests it has in flight, bytes
 * [mmap_offset, +mmap_size) of the file descriptor, one region per queue
 * of queue_size descriptors.  The front-end asks for it with num_queues
 * and queue_size set and keeps the descriptor of the reply; it gives it
 * back with SET_INFLIGHT_FD to a back-end that restarted.  Its layout is
 * the specification's (vhost-user.rst, "Inflight I/O tracking").
 */
typedef struct VhostUserInflight {
    uint64_t mmap_size;
    uint64_t mmap_offset;
    uint16_t num_queues;
    uint16_t queue_size;
    uint32_t padding;           /* as the front-end's C struct has it */
} VhostUserInflight;
_Static_assert(sizeof(VhostUserInflight) == 24, "inflight is 24 bytes");

/* Every payload a back-end without IOTLB takes. */
typedef union VhostUserPayload {
    uint64_t u64;
    VhostUserVringState state;
    VhostUserVringAddr addr;
    VhostUserMemory memory;
    VhostUserConfig config;
    VhostUserLog log;
    VhostUserInflight inflight;
    VhostUserMemRegMsg mem_reg;
} VhostUserPayload;

/*
 * The longest payload the back-end reads: a full GET_CONFIG.  A front-end
 * that announces a longer one breaks the protocol: the back-end closes
 * the connection rather than read (or allocate) what the front-end claims.
 */
#define VHOST_USER_PAYLOAD_MAX sizeof(VhostUserConfig)
_Static_assert(VHOST_USER_PAYLOAD_MAX == 268, "a full config is 268 bytes");
_Static_assert(sizeof(VhostUserMemory) <= VHOST_USER_PAYLOAD_MAX &&
               sizeof(VhostUserVringAddr) <= VHOST_USER_PAYLOAD_MAX,
               "every payload fits");

/* Most file descriptors one message carries (SET_MEM_TABLE's regions). */
#define VHOST_USER_MAX_FDS VHOST_MEMORY_BASELINE_NREGIONS

#endif
