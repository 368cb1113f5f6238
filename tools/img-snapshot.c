/*
 * qblock-img snapshot: lists, creates, applies and deletes the internal
 * snapshots of an image; and the snapshot table as qemu-img prints it,
 * which info shares.
 */
#include "qblock-img.h"

#include <time.h>

#include "block/snapshot.h"

/*
 * One line of the table without its newline, or the column titles for
 * @sn == NULL, in qemu-img's column widths: names longer than the column
 * push the rest of the line right, as there.
 */
static void img_snapshot_print_line(const QEMUSnapshotInfo *sn)
{
    g_autofree char *size = NULL;
    char date[32] = "", clock[64], icount[32] = "";
    time_t t;
    struct tm tm;
    uint64_t secs;

    if (!sn) {
        printf("%-10s%-17s%8s%20s%13s%11s", "ID", "TAG", "VM SIZE", "DATE",
               "VM CLOCK", "ICOUNT");
        return;
    }
    t = sn->date_sec;
    if (localtime_r(&t, &tm)) {
        strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S", &tm);
    }
    secs = sn->vm_clock_nsec / 1000000000;
    snprintf(clock, sizeof(clock), "%02d:%02d:%02d.%03d", (int)(secs / 3600),
             (int)((secs / 60) % 60), (int)(secs % 60),
             (int)((sn->vm_clock_nsec / 1000000) % 1000));
    if (sn->icount != QEMU_SNAPSHOT_NO_ICOUNT) {
        snprintf(icount, sizeof(icount), "%" PRId64, (int64_t)sn->icount);
    }
    size = size_to_str(sn->vm_state_size);
    printf("%-9s %-16s %8s%20s%13s%11s", sn->id_str, sn->name, size, date,
           clock, icount);
}

void img_snapshot_print_list(const QEMUSnapshotInfo *tab, int n)
{
    printf("Snapshot list:\n");
    img_snapshot_print_line(NULL);
    printf("\n");
    for (int i = 0; i < n; i++) {
        img_snapshot_print_line(&tab[i]);
        printf("\n");
    }
}

typedef enum ImgSnapshotAction {
    IMG_SNAPSHOT_NONE,
    IMG_SNAPSHOT_LIST,
    IMG_SNAPSHOT_APPLY,
    IMG_SNAPSHOT_CREATE,
    IMG_SNAPSHOT_DELETE,
} ImgSnapshotAction;

static int img_snapshot_list(BlockDriverState *bs)
{
    QEMUSnapshotInfo *tab;
    int n = bdrv_snapshot_list(bs, &tab);

    if (n > 0) {
        img_snapshot_print_list(tab, n);
    }
    g_free(tab);
    return 0;
}

static int img_snapshot_create(BlockDriverState *bs, const char *name)
{
    /* qemu-img records the icount as 0, not as unknown */
    QEMUSnapshotInfo sn = { 0 };
    int64_t now = g_get_real_time();
    int ret;

    pstrcpy(sn.name, sizeof(sn.name), name);
    sn.date_sec = now / G_USEC_PER_SEC;
    sn.date_nsec = (now % G_USEC_PER_SEC) * 1000;
    ret = bdrv_snapshot_create(bs, &sn);
    if (ret < 0) {
        error_report("Could not create snapshot '%s': %d (%s)", name, ret,
                     strerror(-ret));
        return 1;
    }
    return 0;
}

static int img_snapshot_apply(BlockDriverState *bs, const char *name)
{
    Error *err = NULL;

    if (bdrv_snapshot_goto(bs, name, &err) < 0) {
        error_report("Could not apply snapshot '%s': %s", name,
                     error_get_pretty(err));
        error_free(err);
        return 1;
    }
    return 0;
}

static int img_snapshot_delete(BlockDriverState *bs, const char *name)
{
    QEMUSnapshotInfo sn;
    Error *err = NULL;

    if (bdrv_snapshot_find(bs, &sn, name) < 0) {
        error_report("Could not delete snapshot '%s': snapshot not found",
                     name);
        return 1;
    }
    if (bdrv_snapshot_delete(bs, sn.id_str, sn.name, &err) < 0) {
        error_report("Could not delete snapshot '%s': %s", name,
                     error_get_pretty(err));
        error_free(err);
        return 1;
    }
    return 0;
}

int img_snapshot(int argc, char **argv)
{
    ImgCommonOpts co = { .open = { .flags = BDRV_O_RDWR } };
    ImgSnapshotAction action = IMG_SNAPSHOT_NONE;
    const char *name = NULL;
    BlockBackend *blk;
    int c, ret = 0;

    /* -q changes nothing: nothing is printed on success anyway */
    while ((c = img_getopt(argc, argv, ":la:c:d:hqU",
                           IMG_LONG_OBJECT | IMG_LONG_IMAGE_OPTS |
                           IMG_LONG_FORCE_SHARE,
                           NULL, &co)) != -1) {
        ImgSnapshotAction next = IMG_SNAPSHOT_NONE;

        switch (c) {
        case 'l':
            next = IMG_SNAPSHOT_LIST;
            break;
        case 'a':
            next = IMG_SNAPSHOT_APPLY;
            break;
        case 'c':
            next = IMG_SNAPSHOT_CREATE;
            break;
        case 'd':
            next = IMG_SNAPSHOT_DELETE;
            break;
        }
        if (next != IMG_SNAPSHOT_NONE) {
            if (action != IMG_SNAPSHOT_NONE) {
                img_error_exit("Cannot mix '-l', '-a', '-c', '-d'");
            }
            action = next;
            name = optarg;
            if (action == IMG_SNAPSHOT_LIST) {
                /* listing needs no write access */
                co.open.flags &= ~BDRV_O_RDWR;
            }
        }
    }
    if (optind != argc - 1) {
        img_error_exit("Expecting one image file name");
    }

    blk = img_open(argv[optind], &co.open);
    if (!blk) {
        return 1;
    }
    switch (action) {
    case IMG_SNAPSHOT_NONE:
        break;
    case IMG_SNAPSHOT_LIST:
        ret = img_snapshot_list(blk_bs(blk));
        break;
    case IMG_SNAPSHOT_CREATE:
        ret = img_snapshot_create(blk_bs(blk), name);
        break;
    case IMG_SNAPSHOT_APPLY:
        ret = img_snapshot_apply(blk_bs(blk), name);
        break;
    case IMG_SNAPSHOT_DELETE:
        ret = img_snapshot_delete(blk_bs(blk), name);
        break;
    }
    blk_unref(blk);
    return ret;
}
