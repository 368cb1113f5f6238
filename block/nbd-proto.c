/*
 * NBD protocol names and the mapping of errors onto the wire, shared by
 * the server (block/export/) and the client (block/nbd*.c).
 */
#include "util/osdep.h"
#include "block/nbd-proto.h"

const char *nbd_opt_name(uint32_t opt)
{
    switch (opt) {
    case NBD_OPT_EXPORT_NAME:
        return "NBD_OPT_EXPORT_NAME";
    case NBD_OPT_ABORT:
        return "NBD_OPT_ABORT";
    case NBD_OPT_LIST:
        return "NBD_OPT_LIST";
    case NBD_OPT_STARTTLS:
        return "NBD_OPT_STARTTLS";
    case NBD_OPT_INFO:
        return "NBD_OPT_INFO";
    case NBD_OPT_GO:
        return "NBD_OPT_GO";
    case NBD_OPT_STRUCTURED_REPLY:
        return "NBD_OPT_STRUCTURED_REPLY";
    case NBD_OPT_LIST_META_CONTEXT:
        return "NBD_OPT_LIST_META_CONTEXT";
    case NBD_OPT_SET_META_CONTEXT:
        return "NBD_OPT_SET_META_CONTEXT";
    default:
        return "unknown option";
    }
}

const char *nbd_cmd_name(uint16_t cmd)
{
    switch (cmd) {
    case NBD_CMD_READ:
        return "NBD_CMD_READ";
    case NBD_CMD_WRITE:
        return "NBD_CMD_WRITE";
    case NBD_CMD_DISC:
        return "NBD_CMD_DISC";
    case NBD_CMD_FLUSH:
        return "NBD_CMD_FLUSH";
    case NBD_CMD_TRIM:
        return "NBD_CMD_TRIM";
    case NBD_CMD_CACHE:
        return "NBD_CMD_CACHE";
    case NBD_CMD_WRITE_ZEROES:
        return "NBD_CMD_WRITE_ZEROES";
    case NBD_CMD_BLOCK_STATUS:
        return "NBD_CMD_BLOCK_STATUS";
    default:
        return "unknown command";
    }
}

const char *nbd_rep_name(uint32_t rep)
{
    switch (rep) {
    case NBD_REP_ACK:
        return "NBD_REP_ACK";
    case NBD_REP_SERVER:
        return "NBD_REP_SERVER";
    case NBD_REP_INFO:
        return "NBD_REP_INFO";
    case NBD_REP_META_CONTEXT:
        return "NBD_REP_META_CONTEXT";
    case NBD_REP_ERR_UNSUP:
        return "NBD_REP_ERR_UNSUP";
    case NBD_REP_ERR_POLICY:
        return "NBD_REP_ERR_POLICY";
    case NBD_REP_ERR_INVALID:
        return "NBD_REP_ERR_INVALID";
    case NBD_REP_ERR_PLATFORM:
        return "NBD_REP_ERR_PLATFORM";
    case NBD_REP_ERR_TLS_REQD:
        return "NBD_REP_ERR_TLS_REQD";
    case NBD_REP_ERR_UNKNOWN:
        return "NBD_REP_ERR_UNKNOWN";
    case NBD_REP_ERR_SHUTDOWN:
        return "NBD_REP_ERR_SHUTDOWN";
    case NBD_REP_ERR_BLOCK_SIZE_REQD:
        return "NBD_REP_ERR_BLOCK_SIZE_REQD";
    case NBD_REP_ERR_TOO_BIG:
        return "NBD_REP_ERR_TOO_BIG";
    default:
        return "unknown reply";
    }
}

/*
 * The protocol has a handful of error values.  An error the block layer
 * returns that has no counterpart is an I/O error as far as the client
 * can tell (EIO), which says more than QEMU's choice of EINVAL.
 * ENOTSUP is sent only for NBD_CMD_FLAG_FAST_ZERO, by the caller, as the
 * protocol asks; anywhere else it means the request cannot be served.
 */
uint32_t nbd_errno_to_wire(int err)
{
    switch (-err) {
    case 0:
        return NBD_SUCCESS;
    case EPERM:
    case EACCES:
    case EROFS:
        return NBD_EPERM;
    case ENOMEM:
        return NBD_ENOMEM;
    case EINVAL:
    case ENOTSUP:
        return NBD_EINVAL;
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
        return NBD_ENOSPC;
    case EOVERFLOW:
        return NBD_EOVERFLOW;
    case ESHUTDOWN:
        return NBD_ESHUTDOWN;
    default:
        return NBD_EIO;
    }
}
