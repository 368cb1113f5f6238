/*
 * The guest side of the qtest harnesses (see libqguest.h).
 */

#include "libqguest.h"

#define QGUEST_WAIT_NS (20 * INT64_C(1000000000))

static void *qguest_map(void *opaque, uint64_t addr, uint64_t *len)
{
    QGuest *g = opaque;
    uint64_t half = g->ram_size / 2;
    uint64_t region_end = addr < half ? half : g->ram_size;

    if (addr >= g->ram_size) {
        return NULL;
    }
    *len = MIN(*len, region_end - addr);
    return addr < half ? g->ram[0] + addr : g->ram[1] + (addr - half);
}

static void qguest_irq_set(void *opaque, int level)
{
    QGuest *g = opaque;

    if (level && !g->irq_level) {
        g->irq_raised++;
    }
    g->irq_level = level;
}

QGuest *qguest_new(uint64_t ram_size)
{
    QGuest *g = g_new0(QGuest, 1);

    g_assert_cmpuint(ram_size % 2, ==, 0);
    g->ram_size = ram_size;
    g->ram[0] = g_malloc0(ram_size / 2);
    g->ram[1] = g_malloc0(ram_size / 2);
    /* page 0 stays unused, so that address 0 is never a valid buffer */
    g->alloc_next = 4096;
    g->mem = (GuestMemory) { .map = qguest_map, .opaque = g };
    g->irq = (IRQLine) { .set = qguest_irq_set, .opaque = g };
    g->savevm = savevm_state_new();
    g_assert_cmpint(savevm_register_ram(g->savevm, &g->mem, ram_size,
                                        &error_abort), ==, 0);
    return g;
}

void qguest_free(QGuest *g)
{
    savevm_state_free(g->savevm);
    g_free(g->ram[0]);
    g_free(g->ram[1]);
    g_free(g);
}

uint64_t qguest_alloc(QGuest *g, uint64_t size, uint64_t align)
{
    uint64_t addr = QEMU_ALIGN_UP(g->alloc_next, align);

    g_assert_cmpuint(addr + size, <=, g->ram_size);
    g->alloc_next = addr + size;
    return addr;
}

void qguest_memwrite(QGuest *g, uint64_t addr, const void *buf, size_t len)
{
    g_assert_cmpint(guest_memory_write(&g->mem, addr, buf, len), ==, 0);
}

void qguest_memread(QGuest *g, uint64_t addr, void *buf, size_t len)
{
    g_assert_cmpint(guest_memory_read(&g->mem, addr, buf, len), ==, 0);
}

void qguest_memset(QGuest *g, uint64_t addr, int c, size_t len)
{
    g_autofree uint8_t *buf = g_malloc(len);

    memset(buf, c, len);
    qguest_memwrite(g, addr, buf, len);
}

void qguest_writew(QGuest *g, uint64_t addr, uint16_t val)
{
    uint16_t le = GUINT16_TO_LE(val);

    qguest_memwrite(g, addr, &le, sizeof(le));
}

void qguest_writel(QGuest *g, uint64_t addr, uint32_t val)
{
    uint32_t le = GUINT32_TO_LE(val);

    qguest_memwrite(g, addr, &le, sizeof(le));
}

void qguest_writeq(QGuest *g, uint64_t addr, uint64_t val)
{
    uint64_t le = GUINT64_TO_LE(val);

    qguest_memwrite(g, addr, &le, sizeof(le));
}

uint16_t qguest_readw(QGuest *g, uint64_t addr)
{
    uint16_t le;

    qguest_memread(g, addr, &le, sizeof(le));
    return GUINT16_FROM_LE(le);
}

uint32_t qguest_readl(QGuest *g, uint64_t addr)
{
    uint32_t le;

    qguest_memread(g, addr, &le, sizeof(le));
    return GUINT32_FROM_LE(le);
}

char *qguest_hmp(QGuest *g, const char *cmdline)
{
    g_auto(GStrv) argv = NULL;
    Error *err = NULL;
    char *msg = NULL;
    int argc;

    g_assert_true(g_shell_parse_argv(cmdline, &argc, &argv, NULL));
    if (!strcmp(argv[0], "savevm") && argc <= 2) {
        savevm_save_snapshot(g->savevm, argv[1], NULL, &err);
    } else if (!strcmp(argv[0], "loadvm") && argc == 2) {
        savevm_load_snapshot(g->savevm, argv[1], NULL, &err);
    } else if (!strcmp(argv[0], "delvm") && argc == 2) {
        savevm_delete_snapshot(g->savevm, argv[1], &err);
    } else {
        g_error("qguest_hmp: unknown command or arguments: '%s'", cmdline);
    }
    if (err) {
        msg = g_strdup(error_get_pretty(err));
        error_free(err);
    }
    return msg;
}

void qguest_wait(bool (*cond)(void *opaque), void *opaque)
{
    AioContext *ctx = qemu_get_aio_context();
    int64_t deadline = get_clock_ns() + QGUEST_WAIT_NS;

    while (!cond(opaque)) {
        if (!aio_poll(ctx, false)) {
            /* work may be in a thread: give it time, not the CPU */
            g_usleep(20);
        }
        if (get_clock_ns() > deadline) {
            g_error("the device did not get there within 20 seconds");
        }
    }
}

static bool qguest_irq_high(void *opaque)
{
    return ((QGuest *)opaque)->irq_level;
}

void qguest_wait_irq(QGuest *g)
{
    qguest_wait(qguest_irq_high, g);
}

void qguest_settle(void)
{
    while (aio_poll(qemu_get_aio_context(), false)) {
        continue;
    }
}

char *qguest_image_new(const char *fmt, int64_t size)
{
    GError *gerr = NULL;
    char *path = NULL;
    int fd = g_file_open_tmp("qblock-qtest-XXXXXX", &path, &gerr);

    g_assert_no_error(gerr);
    close(fd);
    if (!strcmp(fmt, "raw")) {
        g_assert_cmpint(truncate(path, size), ==, 0);
    } else {
        const BlockDriver *drv = bdrv_find_format(fmt);
        QemuOptsList *list;
        QemuOpts *opts;

        g_assert_nonnull(drv);
        list = qemu_opts_append(NULL, drv->create_opts);
        opts = qemu_opts_create(list);
        qemu_opt_set_number(opts, "size", size, &error_abort);
        g_assert_cmpint(bdrv_create(drv, path, opts, &error_abort), ==, 0);
        qemu_opts_del(opts);
        qemu_opts_free(list);
    }
    return path;
}

BlockBackend *qguest_blk_open(const char *path, const char *fmt,
                              const char *mode, QDict *extra)
{
    QDict *opts = qdict_new();
    int flags = BDRV_O_RDWR;
    bool writethrough;
    BlockBackend *blk;

    g_assert_cmpint(bdrv_parse_cache_mode(mode, &flags, &writethrough), ==,
                    0);
    qdict_put_str(opts, "driver", fmt);
    if (extra) {
        qdict_join(opts, extra, true);
        qdict_unref(extra);
    }
    if (!qdict_haskey(opts, "file.driver")) {
        qdict_put_str(opts, "file.driver", "file");
        qdict_put_str(opts, "file.filename", path);
    }
    blk = blk_new_open(NULL, NULL, opts, flags, &error_abort);
    g_assert_nonnull(blk);
    blk_set_enable_write_cache(blk, !writethrough);
    return blk;
}

BlockDriverState *qguest_file_node(BlockBackend *blk)
{
    BlockDriverState *bs = blk_bs(blk);

    while (bs->file) {
        bs = bs->file->bs;
    }
    return bs;
}

uint64_t qguest_file_flushes(BlockBackend *blk)
{
    return qguest_file_node(blk)->stats.flushes;
}

void qguest_pattern(void *buf, size_t len, uint64_t start_sector,
                    uint32_t seed)
{
    uint8_t *p = buf;

    for (size_t i = 0; i < len; i++) {
        uint64_t sector = start_sector + i / 512;

        p[i] = (uint8_t)(sector * 131 + (i % 512) * 7 + seed * 29 + 1);
    }
}
