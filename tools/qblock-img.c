/*
 * qblock-img: qemu-img's command line over the qblock block layer.
 *
 * This file holds the sub-command table, the global options and the help
 * text.  Each sub-command lives with its relatives in tools/img-*.c and
 * sees only its own argv (argv[0] = the sub-command's name), with getopt
 * reset, exactly as qemu-img runs its sub-commands: so option parsing,
 * error texts and exit codes match.
 */
#include "qblock-img.h"

#include "config-host.h"
#include "util/user-object.h"

/* The qemu-img release whose command line and output this tool follows. */
#define IMG_COMPAT_VERSION "7.2.0"

typedef struct ImgCmd {
    const char *name;
    int (*handler)(int argc, char **argv);
} ImgCmd;

static const ImgCmd img_cmds[] = {
    { "amend",   img_amend },
    { "bench",   img_bench },
    { "bitmap",  img_bitmap },
    { "check",   img_check },
    { "commit",  img_commit },
    { "compare", img_compare },
    { "convert", img_convert },
    { "create",  img_create },
    { "dd",      img_dd },
    { "info",    img_info },
    { "map",     img_map },
    { "measure", img_measure },
    { "rebase",  img_rebase },
    { "resize",  img_resize },
    { "snapshot", img_snapshot },
};

static void img_print_version(void)
{
    printf(IMG_TOOL_NAME " version " IMG_COMPAT_VERSION
           " (qblock " QBLOCK_VERSION ")\n"
           "Copyright (c) the qblock authors\n");
}

static void img_print_format(void *opaque, const char *name)
{
    printf(" %s", name);
}

/*
 * The text follows qemu-img's, restricted to the sub-commands and options
 * this tool implements.
 */
void img_help(void)
{
    img_print_version();
    printf("usage: " IMG_TOOL_NAME " [standard options] command "
           "[command options]\n"
           "QEMU disk image utility\n"
           "\n"
           "    '-h', '--help'       display this help and exit\n"
           "    '-V', '--version'    output version information and exit\n"
           "    '-T', '--trace'      [[enable=]<pattern>][,events=<file>]"
           "[,file=<file>]\n"
           "                         specify tracing options\n"
           "\n"
           "Command syntax:\n"
           "  amend [--object objectdef] "
           "[--image-opts] [-p] [-q] [-f fmt] [-t cache] "
           "[--force] -o options filename\n"
           "  bench [-c count] [-d depth] [-f fmt] "
           "[--flush-interval=flush_interval] [-i aio] [-n] [--no-drain] "
           "[-o offset] [--pattern=pattern] [-q] [-s buffer_size] "
           "[-S step_size] [-t cache] [-w] [-U] filename\n"
           "  bitmap (--merge SOURCE | --add | --remove | --clear | "
           "--enable | --disable)... [-b source_file [-F source_fmt]] "
           "[-g granularity] [--object objectdef] "
           "[--image-opts | -f fmt] filename bitmap\n"
           "  check [--object objectdef] [--image-opts] [-q] [-f fmt] "
           "[--output=ofmt] [-r [leaks | all]] [-T src_cache] [-U] "
           "filename\n"
           "  commit [--object objectdef] "
           "[--image-opts] [-q] [-f fmt] [-t cache] [-b base] "
           "[-r rate_limit] [-d] [-p] filename\n"
           "  compare [--object objectdef] [--image-opts] [-f fmt] "
           "[-F fmt] [-T src_cache] [-p] [-q] [-s] [-U] filename1 "
           "filename2\n"
           "  convert [--object objectdef] [--image-opts] "
           "[--target-image-opts] [--target-is-zero] [--bitmaps] [-U] [-c] "
           "[-p] [-q] "
           "[-n] [-f fmt] [-t cache] [-T src_cache] [-O output_fmt] "
           "[-B backing_file [-F backing_fmt]] [-o options] "
           "[-l snapshot_param] [-S sparse_size] [-m num_coroutines] "
           "[-W] [--salvage] "
           "filename [filename2 [...]] output_filename\n"
           "  create [--object objectdef] [-q] [-f fmt] "
           "[-b backing_file [-F backing_fmt]] [-u] [-o options] "
           "filename [size]\n"
           "  dd [--object objectdef] "
           "[--image-opts] [-U] [-f fmt] [-O output_fmt] "
           "[bs=block_size] [count=blocks] [skip=blocks] if=input "
           "of=output\n"
           "  info [--object objectdef] [--image-opts] [-f fmt] "
           "[--output=ofmt] [--backing-chain] [-U] filename\n"
           "  map [--object objectdef] [--image-opts] [-f fmt] "
           "[--start-offset=offset] [--max-length=len] [--output=ofmt] "
           "[-U] filename\n"
           "  measure [--output=ofmt] [--object objectdef] "
           "[-O output_fmt] [-o options] "
           "[--size N | [--image-opts] [-f fmt] [-l snapshot_param] "
           "filename]\n"
           "  snapshot [--object objectdef] "
           "[--image-opts] [-U] [-q] [-l | -a snapshot | "
           "-c snapshot | -d snapshot] filename\n"
           "  rebase [--object objectdef] "
           "[--image-opts] [-U] [-q] [-f fmt] [-t cache] "
           "[-T src_cache] [-p] [-u] -b backing_file [-F backing_fmt] "
           "filename\n"
           "  resize [--object objectdef] [--image-opts] [-f fmt] "
           "[--preallocation=prealloc] [-q] [--shrink] filename "
           "[+ | -]size\n"
           "\n"
           "Command parameters:\n"
           "  'filename' is a disk image filename\n"
           "  'objectdef' is a user creatable object definition "
           "(--object help lists\n"
           "    the types; a 'secret' supplies passwords and keys: "
           "docs/encryption.md)\n"
           "  'fmt' is the disk image format. It is guessed automatically "
           "in most cases\n"
           "  'cache' is the cache mode used to write the output disk "
           "image, the valid\n"
           "    options are: 'none', 'writeback' (default, except for "
           "convert), 'writethrough',\n"
           "    'directsync' and 'unsafe' (default for convert)\n"
           "  'src_cache' is the cache mode used to read input disk "
           "images, the valid\n"
           "    options are the same as for the 'cache' option\n"
           "  'size' is the disk image size in bytes. Optional suffixes\n"
           "    'k' or 'K' (kilobyte, 1024), 'M' (megabyte, 1024k), "
           "'G' (gigabyte, 1024M),\n"
           "    'T' (terabyte, 1024G), 'P' (petabyte, 1024T) and "
           "'E' (exabyte, 1024P)  are\n"
           "    supported. 'b' is ignored.\n"
           "  'output_filename' is the destination disk image filename\n"
           "  'output_fmt' is the destination format\n"
           "  'options' is a comma separated list of format specific "
           "options in a\n"
           "    name=value format. Use -o help for an overview of the "
           "options supported by\n"
           "    the used format\n"
           "  'snapshot_param' is param used for internal snapshot, "
           "format\n"
           "    is 'snapshot.id=[ID],snapshot.name=[NAME]', or\n"
           "    '[ID_OR_NAME]'\n"
           "  '-c' indicates that target image must be compressed "
           "(qcow format only)\n"
           "  '-u' allows unsafe backing chains. For rebasing, it is "
           "assumed that old and\n"
           "       new backing file match exactly. The image doesn't need "
           "a working\n"
           "       backing file before rebasing in this case (useful for "
           "renaming the\n"
           "       backing file). For image creation, allow creating "
           "without attempting\n"
           "       to open the backing file.\n"
           "  '-h' with or without a command shows this help and lists "
           "the supported formats\n"
           "  '-p' show progress of command (only certain commands)\n"
           "  '-q' use Quiet mode - do not print any output (except "
           "errors)\n"
           "  '-S' indicates the consecutive number of bytes (defaults to "
           "4k) that must\n"
           "       contain only zeros for qemu-img to create a sparse "
           "image during\n"
           "       conversion. If the number of bytes is 0, the source "
           "will not be scanned for\n"
           "       unallocated or zero sectors, and the destination image "
           "will always be\n"
           "       fully allocated\n"
           "  '--output' takes the format in which the output must be "
           "done (human or json)\n"
           "  '-n' skips the target volume creation (useful if the volume "
           "is created\n"
           "       prior to running qemu-img)\n"
           "\n"
           "Parameters to check subcommand:\n"
           "  '-r' tries to repair any inconsistencies that are found "
           "during the check.\n"
           "       '-r leaks' repairs only cluster leaks, whereas '-r all' "
           "fixes all\n"
           "       kinds of errors, with a higher risk of choosing the "
           "wrong fix or\n"
           "       hiding corruption that has already occurred.\n"
           "\n"
           "Parameters to convert subcommand:\n"
           "  '-m' specifies how many coroutines work in parallel during "
           "the convert\n"
           "       process (defaults to 8)\n"
           "  '-W' allow to write to the target out of order rather than "
           "sequential\n"
           "\n"
           "Parameters to snapshot subcommand:\n"
           "  'snapshot' is the name of the snapshot to create, apply or "
           "delete\n"
           "  '-a' applies a snapshot (revert disk to saved state)\n"
           "  '-c' creates a snapshot\n"
           "  '-d' deletes a snapshot\n"
           "  '-l' lists all snapshots in the given image\n"
           "\n"
           "Parameters to compare subcommand:\n"
           "  '-f' first image format\n"
           "  '-F' second image format\n"
           "  '-s' run in Strict mode - fail on different image size or "
           "sector allocation\n"
           "\n"
           "Parameters to dd subcommand:\n"
           "  'bs=BYTES' read and write up to BYTES bytes at a time "
           "(default: 512)\n"
           "  'count=N' copy only N input blocks\n"
           "  'if=FILE' read from FILE\n"
           "  'of=FILE' write to FILE\n"
           "  'skip=N' skip N bs-sized blocks at the start of input\n"
           "\n"
           "Supported formats:");
    bdrv_iterate_format(img_print_format, NULL);
    printf("\n\n");
    exit(EXIT_SUCCESS);
}

void img_error_exit(const char *fmt, ...)
{
    char *msg;
    va_list ap;

    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    error_report("%s", msg);
    g_free(msg);
    fprintf(stderr, "Try '" IMG_TOOL_NAME " --help' for more information\n");
    exit(EXIT_FAILURE);
}

void img_handle_exit_option(int c, char **argv)
{
    switch (c) {
    case ':':
        img_error_exit("missing argument for option '%s'", argv[optind - 1]);
    case '?':
        img_error_exit("unrecognized option '%s'", argv[optind - 1]);
    case 'h':
        img_help();
    }
}

int main(int argc, char **argv)
{
    static const struct option long_options[] = {
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { "trace", required_argument, NULL, 'T' },
        { NULL, 0, NULL, 0 }
    };
    const char *cmdname;
    int c;

    qemu_init_progname(argv[0]);
    bdrv_init();
    /* nothing here uses one, and qemu-img refuses it (no such class) */
    user_object_withhold_type("iothread");

    /* '+': stop at the sub-command; ':': report missing arguments. */
    while ((c = getopt_long(argc, argv, "+:hVT:", long_options,
                            NULL)) != -1) {
        img_handle_exit_option(c, argv);
        switch (c) {
        case 'V':
            img_print_version();
            return EXIT_SUCCESS;
        case 'T':
            /* qblock has no trace events: the option is accepted so that
             * command lines written for qemu-img keep working. */
            break;
        }
    }
    if (optind >= argc) {
        img_error_exit("Not enough arguments");
    }

    cmdname = argv[optind];
    argc -= optind;
    argv += optind;
    /* 0 makes glibc's getopt start afresh for the sub-command. */
    optind = 0;

    for (size_t i = 0; i < ARRAY_SIZE(img_cmds); i++) {
        if (!strcmp(cmdname, img_cmds[i].name)) {
            return img_cmds[i].handler(argc, argv);
        }
    }
    img_error_exit("Command not found: %s", cmdname);
}
