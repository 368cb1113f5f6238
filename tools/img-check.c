/*
 * qblock-img check: the consistency check of an image and its repair
 * (-r leaks|all), reported as qemu-img check reports it.
 */
#include "qblock-img.h"

#include "block/block.h"

/* The result of one check pass, as qemu-img reports it. */
typedef struct ImgCheck {
    const char *filename;
    const char *format;
    BdrvCheckResult r;
} ImgCheck;

static int img_collect_check(BlockDriverState *bs, ImgCheck *check,
                             const char *filename, BdrvCheckMode fix)
{
    check->filename = filename;
    check->format = bdrv_get_format_name(bs);
    return bdrv_check(bs, &check->r, fix);
}

static void img_dump_human_check(const ImgCheck *check)
{
    const BdrvCheckResult *r = &check->r;

    if (!(r->corruptions || r->leaks || r->check_errors)) {
        printf("No errors were found on the image.\n");
    } else {
        if (r->corruptions) {
            printf("\n%d errors were found on the image.\n"
                   "Data may be corrupted, or further writes to the image "
                   "may corrupt it.\n", r->corruptions);
        }
        if (r->leaks) {
            printf("\n%d leaked clusters were found on the image.\n"
                   "This means waste of disk space, but no harm to data.\n",
                   r->leaks);
        }
        if (r->check_errors) {
            printf("\n%d internal errors have occurred during the check.\n",
                   r->check_errors);
        }
    }
    if (r->bfi.total_clusters && r->bfi.allocated_clusters) {
        printf("%" PRId64 "/%" PRId64 " = %0.2f%% allocated, "
               "%0.2f%% fragmented, %0.2f%% compressed clusters\n",
               r->bfi.allocated_clusters, r->bfi.total_clusters,
               r->bfi.allocated_clusters * 100.0 / r->bfi.total_clusters,
               r->bfi.fragmented_clusters * 100.0 /
               r->bfi.allocated_clusters,
               r->bfi.compressed_clusters * 100.0 /
               r->bfi.allocated_clusters);
    }
    if (r->image_end_offset) {
        printf("Image end offset: %" PRId64 "\n", r->image_end_offset);
    }
}

static void img_dump_json_check(const ImgCheck *check)
{
    const BdrvCheckResult *r = &check->r;
    g_autoptr(JsonBuilder) b = json_builder_new();

    json_builder_begin_object(b);
    json_builder_set_member_name(b, "filename");
    json_builder_add_string_value(b, check->filename);
    json_builder_set_member_name(b, "format");
    json_builder_add_string_value(b, check->format);
    img_json_add_int(b, "check-errors", r->check_errors, false);
    img_json_add_int(b, "image-end-offset", r->image_end_offset, true);
    img_json_add_int(b, "corruptions", r->corruptions, true);
    img_json_add_int(b, "leaks", r->leaks, true);
    img_json_add_int(b, "corruptions-fixed", r->corruptions_fixed, true);
    img_json_add_int(b, "leaks-fixed", r->leaks_fixed, true);
    img_json_add_int(b, "total-clusters", r->bfi.total_clusters, true);
    img_json_add_int(b, "allocated-clusters", r->bfi.allocated_clusters,
                     true);
    img_json_add_int(b, "fragmented-clusters", r->bfi.fragmented_clusters,
                     true);
    img_json_add_int(b, "compressed-clusters", r->bfi.compressed_clusters,
                     true);
    img_json_print_object(b);
}

int img_check(int argc, char **argv)
{
    static const struct option long_options[] = {
        { "repair", required_argument, NULL, 'r' },
        { NULL, 0, NULL, 0 }
    };
    ImgCommonOpts co = { .open = { .flags = BDRV_O_CHECK } };
    const char *cache = IMG_CACHE_DEFAULT, *filename;
    BdrvCheckMode fix = 0;
    bool json = false;
    ImgCheck check = { 0 };
    BlockBackend *blk;
    int c, ret;

    while ((c = img_getopt(argc, argv, ":hf:r:T:qU",
                           IMG_LONG_OBJECT | IMG_LONG_FORMAT | IMG_LONG_OUTPUT |
                           IMG_LONG_IMAGE_OPTS | IMG_LONG_FORCE_SHARE,
                           long_options, &co)) != -1) {
        switch (c) {
        case 'r':
            co.open.flags |= BDRV_O_RDWR;
            if (!strcmp(optarg, "leaks")) {
                fix = BDRV_FIX_LEAKS;
            } else if (!strcmp(optarg, "all")) {
                fix = BDRV_FIX_LEAKS | BDRV_FIX_ERRORS;
            } else {
                img_error_exit("Unknown option value for -r "
                               "(expecting 'leaks' or 'all'): %s", optarg);
            }
            break;
        case 'T':
            cache = optarg;
            break;
        }
    }
    if (optind != argc - 1) {
        img_error_exit("Expecting one image file name");
    }
    filename = argv[optind];
    if (co.output && !img_parse_output(co.output, &json)) {
        return 1;
    }
    if (img_parse_cache(cache, &co.open) < 0) {
        error_report("Invalid source cache option: %s", cache);
        return 1;
    }

    blk = img_open(filename, &co.open);
    if (!blk) {
        return 1;
    }
    ret = img_collect_check(blk_bs(blk), &check, filename, fix);
    if (ret == -ENOTSUP) {
        error_report("This image format does not support checks");
        ret = 63;
        goto out;
    }

    if (!ret && (check.r.corruptions_fixed || check.r.leaks_fixed)) {
        int corruptions_fixed = check.r.corruptions_fixed;
        int leaks_fixed = check.r.leaks_fixed;

        if (!json && !co.quiet) {
            printf("The following inconsistencies were found and "
                   "repaired:\n\n"
                   "    %d leaked clusters\n"
                   "    %d corruptions\n\n"
                   "Double checking the fixed image now...\n",
                   leaks_fixed, corruptions_fixed);
        }
        ret = img_collect_check(blk_bs(blk), &check, filename, 0);
        check.r.corruptions_fixed = corruptions_fixed;
        check.r.leaks_fixed = leaks_fixed;
    }

    if (!ret && !co.quiet) {
        if (json) {
            img_dump_json_check(&check);
        } else {
            img_dump_human_check(&check);
        }
    }
    if (ret || check.r.check_errors) {
        if (ret) {
            error_report("Check failed: %s", strerror(-ret));
        } else {
            error_report("Check failed");
        }
        ret = 1;
    } else if (check.r.corruptions) {
        ret = 2;
    } else if (check.r.leaks) {
        ret = 3;
    }
out:
    blk_unref(blk);
    return ret;
}
