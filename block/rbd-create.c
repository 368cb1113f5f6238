/*
 * rbd: creating an image (qemu-img create, convert -O raw rbd:...).
 *
 * The file name says where (rbd-filename.c), the creation options how
 * big, with which object size and whether librbd encrypts it
 * (rbd-encrypt.c); the image gets the cluster's default format (2) and
 * features.
 */
#include "block/rbd.h"
#include "qapi/qapi-opts.h"

/* librbd's smallest object: order 12, 4 KiB */
#define RBD_MIN_OBJECT_ORDER 12

/* cluster_size -> object order (log2 of the object size); -1 on error */
static int qrbd_object_order(QemuOpts *opts, Error **errp)
{
    uint64_t size = qemu_opt_get_size(opts, "cluster_size", 0);

    if (!size) {
        return 0;               /* the cluster's rbd_default_order */
    }
    if (size & (size - 1)) {
        error_setg(errp, "obj size needs to be power of 2");
        return -1;
    }
    if (size < (1ULL << RBD_MIN_OBJECT_ORDER)) {
        error_setg(errp, "obj size too small");
        return -1;
    }
    return ctz64(size);
}

/* The image the node options @options name, as @opts say. */
static int qrbd_create(QDict *options, QemuOpts *opts, Error **errp)
{
    RBDConnectOpts o = {0};
    rados_t cluster;
    rados_ioctx_t io_ctx;
    rbd_image_options_t img_opts;
    uint64_t size = qemu_opt_get_size(opts, "size", 0);
    int order, ret;

    if (qemu_opt_get(opts, "encrypt.format") &&
        !qemu_opt_get(opts, "encrypt.key-secret")) {
        error_setg(errp, "Parameter 'key-secret' is missing");
        return -EINVAL;
    }
    order = qrbd_object_order(opts, errp);
    if (order < 0) {
        return -EINVAL;
    }
    if (qemu_opt_get(opts, RBD_OPT_PASSWORD_SECRET)) {
        /* the file name cannot name key-secret: no clash here */
        qdict_put_str(options, RBD_OPT_PASSWORD_SECRET,
                      qemu_opt_get(opts, RBD_OPT_PASSWORD_SECRET));
    }
    if (!qrbd_connect_opts_parse(options, &o, true, errp)) {
        qrbd_connect_opts_free(&o);
        return -EINVAL;
    }
    ret = qrbd_connect(&o, true, &cluster, &io_ctx, errp);
    if (ret < 0) {
        qrbd_connect_opts_free(&o);
        return ret;
    }
    qrbd_lib.rbd_image_options_create(&img_opts);
    if (order) {
        qrbd_lib.rbd_image_options_set_uint64(img_opts,
                                              RBD_IMAGE_OPTION_ORDER, order);
    }
    ret = qrbd_lib.rbd_create4(io_ctx, o.image, size, img_opts);
    if (ret < 0) {
        error_setg_errno(errp, -ret, "error rbd create");
    } else if (qemu_opt_get(opts, "encrypt.format")) {
        ret = qrbd_encryption_create(io_ctx, o.image, opts, size, errp);
        if (ret < 0) {
            /* never leave a plain image where an encrypted one was asked */
            qrbd_lib.rbd_remove(io_ctx, o.image);
        }
    }
    qrbd_lib.rbd_image_options_destroy(img_opts);
    qrbd_disconnect(cluster, io_ctx);
    qrbd_connect_opts_free(&o);
    return ret;
}

/* qemu-img create: the image rbd:POOL/IMAGE[:OPTIONS] names. */
int coroutine_fn qrbd_co_create_opts(const BlockDriver *drv,
                                     const char *filename, QemuOpts *opts,
                                     Error **errp)
{
    g_autoptr(QDict) options = qdict_new();
    Error *local_err = NULL;

    qrbd_parse_filename(filename, options, &local_err);
    if (local_err) {
        error_propagate(errp, local_err);
        return -EINVAL;
    }
    return qrbd_create(options, opts, errp);
}

/* blockdev-create: the image QMP's location (BlockdevOptionsRbd) names. */
int coroutine_fn qrbd_co_create_on_node(const BlockDriver *drv,
                                        const BdrvCreateTarget *tgt,
                                        QemuOpts *opts, Error **errp)
{
    /* the parser takes what it knows out of its copy */
    g_autoptr(QDict) options = qdict_clone(tgt->location);

    return qrbd_create(options, opts, errp);
}
