/*
 * fuzz-vvfat-parse: a mutated FAT volume goes through the parser that
 * decides what of a guest's writes vvfat's rw mode carries to the host
 * (block/vvfat-parse.c).  The guest writes anything it likes, so this is
 * the driver's hostile input: chains that loop or cross, clusters out of
 * the volume, long names with bad checksums or sequences, names with '/'
 * or "..", deep directories.  What comes out must hold inv. 7 of
 * block/vvfat.h, checked here entry by entry.
 *
 * The input is the volume from its FAT on: the first byte picks FAT12
 * (bit 0 set), FAT32 (bit 1 set) or FAT16, one FAT of 512 bytes, a root
 * directory of 16 entries (FAT32: none, the root is the chain from
 * cluster 2), then the data clusters (8 KiB each, 20 of them, zeroes past
 * the input's end).
 */
#include "block/vvfat.h"

#define FUZZ_CLUSTERS   20

typedef struct FuzzImg {
    const uint8_t *data;
    size_t size;
} FuzzImg;

static int fuzz_read(void *opaque, uint64_t off, void *buf, size_t len)
{
    FuzzImg *img = opaque;
    size_t have = off < img->size ? MIN(len, img->size - off) : 0;

    memcpy(buf, img->data + off, have);
    memset((uint8_t *)buf + have, 0, len - have);
    return 0;
}

/* inv. 7, entry by entry */
static void fuzz_check(const VvfatLayout *lay, const VvfatTree *t)
{
    g_autofree uint8_t *seen = g_malloc0(lay->clusters + 2);

    assert(t->n >= 1 && t->e[0].is_dir);
    assert(!lay->root_cluster || t->e[0].n_chain >= 1);
    for (uint32_t i = lay->root_cluster ? 0 : 1; i < t->n; i++) {
        const VvfatEntry *e = &t->e[i];
        g_autofree char *path = vvfat_tree_path(t, i, "");

        if (i > 0) {
            assert(e->parent < i && t->e[e->parent].is_dir);
            assert(e->name[0] && !strchr(e->name, '/'));
            assert(strcmp(e->name, ".") && strcmp(e->name, ".."));
            assert(g_utf8_validate(e->name, -1, NULL));
            assert(path[0] == '/');
        }
        if (!e->is_dir) {
            assert(e->n_chain == DIV_ROUND_UP((uint64_t)e->size,
                                              lay->cluster_size));
        }
        assert(e->chain + (uint64_t)e->n_chain <= t->n_chains);
        for (uint32_t k = 0; k < e->n_chain; k++) {
            uint32_t c = t->chains[e->chain + k];

            assert(c >= VVFAT_FIRST_CLUSTER && c < lay->clusters + 2);
            assert(!seen[c]);
            seen[c] = 1;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FuzzImg img = { data, size };
    int type = !size ? 16 : data[0] & 1 ? 12 : data[0] & 2 ? 32 : 16;
    VvfatLayout lay = {
        .fat_type = type,
        .fat_offset = 0, .fat_bytes = 512,
        .root_offset = 512, .root_entries = type == 32 ? 0 : 16,
        .data_offset = type == 32 ? 512 : 1024, .clusters = FUZZ_CLUSTERS,
        .cluster_size = VVFAT_CLUSTER_SIZE,
        .root_cluster = type == 32 ? VVFAT_FIRST_CLUSTER : 0,
    };
    VvfatTree *t;
    char *why;

    if (vvfat_parse_tree(&lay, fuzz_read, &img, &t, &why) == 0) {
        assert(!why);
        fuzz_check(&lay, t);
        vvfat_tree_free(t);
    } else {
        assert(why && !t);
        g_free(why);
    }
    return 0;
}
