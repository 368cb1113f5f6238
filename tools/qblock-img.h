/*
 * qblock-img: private interface between the sub-command files.
 *
 * The tool accepts qemu-img's command lines and prints what qemu-img
 * prints.  Each sub-command is a function img_<name>(argc, argv) that
 * receives its own argv (argv[0] is the sub-command name) and returns the
 * process exit status.  The helpers here do what several sub-commands
 * share: the options they have in common (img_getopt) and option errors
 * in qemu-img's words, number parsing with qemu-img's messages, creation
 * option lists, opening images, cache modes, -l snapshots, the progress
 * meter and JSON output ordered as QEMU's dictionaries order it.
 */
#ifndef QBLOCK_IMG_H
#define QBLOCK_IMG_H

#include <getopt.h>
#include <json-glib/json-glib.h>

#include "qblock/block-backend.h"
#include "util/cutils.h"
#include "util/json.h"
#include "snapshot-arg.h"

/* Name in the "Try '...'" hint and usage text (qemu-img prints its own). */
#define IMG_TOOL_NAME "qblock-img"

/* Cache modes qemu-img uses when -t / -T are not given. */
#define IMG_CACHE_DEFAULT "writeback"
#define IMG_CACHE_CONVERT_DEFAULT "unsafe"

/* Prints the full help text and exits with status 0 (`-h` anywhere). */
QEMU_NORETURN void img_help(void);
/*
 * Prints "progname: <message>" and the "Try ... --help" hint, then exits
 * with status 1: qemu-img's answer to a malformed command line.
 */
QEMU_NORETURN void img_error_exit(const char *fmt, ...) QEMU_PRINTF(1, 2);
/*
 * Handles the getopt_long() results that end the program alike on every
 * qemu-img command line, the tool's own and each sub-command's: ':'
 * (missing argument) and '?' (unknown option) print the complaint and
 * exit with status 1, 'h' prints the help and exits with 0.  Returns for
 * any other @c, the value getopt_long() returned.
 */
void img_handle_exit_option(int c, char **argv);

/*
 * Parses a size for option @name as qemu-img's cvtnum does: negative
 * values and bad suffixes print the two-line suffix hint, values outside
 * [@min, @max] print the range.  Returns the value or -1 after printing.
 */
int64_t img_cvtnum_full(const char *name, const char *value, int64_t min,
                        int64_t max);
int64_t img_cvtnum(const char *name, const char *value);

/* Parses --output: returns true for json; exits on anything but human/json
 * after printing qemu-img's message. */
bool img_parse_output(const char *arg, bool *json);
/*
 * Prints @node as qemu-img --output=json does: pretty, members in QEMU's
 * QDict order, and a final newline.
 */
void img_json_print(JsonNode *node);
/*
 * Adds member @name with the value @val to the object that @b builds;
 * nothing if @optional and @val is 0 (the counters that qemu-img's JSON
 * reports leave out when they are zero).
 */
void img_json_add_int(JsonBuilder *b, const char *name, int64_t val,
                      bool optional);
/*
 * Ends the object that @b builds and prints it with img_json_print(): the
 * last step of each JSON report that a sub-command builds member by
 * member.
 */
void img_json_print_object(JsonBuilder *b);

/* True if a -o string asks for the option list ("help" or "?" element). */
bool img_has_help_option(const char *options);
/*
 * Prints the creation options of format @fmt, merged with those of
 * @filename's protocol when @filename is not NULL (`-o help`).  Returns
 * the exit status.
 */
int img_print_create_help(const char *filename, const char *fmt);
/*
 * The creation options of format @drv followed by those of @filename's
 * protocol: what creating the image takes (freed with qemu_opts_free()).
 * NULL with @errp set when the protocol is unknown or either driver
 * cannot create images ("Format driver 'x' does not support image
 * creation").
 */
QemuOptsList *img_create_opts_list(const BlockDriver *drv, const char *filename,
                                   Error **errp);
/*
 * Appends -o arguments as qemu-img does: "a=b" + "c=d" -> "a=b,c=d";
 * exits with qemu-img's message for an argument that is not a valid
 * option list ("", a trailing unescaped comma).
 */
char *img_accumulate_options(char *options, const char *optarg);

/*
 * Options shared by the open helper.  @flags are BDRV_O_* flags; the
 * helper adds BDRV_O_NO_SHARE unless @force_share.
 */
typedef struct ImgOpenOptions {
    const char *fmt;        /* -f, or NULL to probe */
    bool image_opts;        /* the name is a key=value,... option string */
    int flags;
    bool writethrough;      /* from the cache mode */
    bool force_share;       /* -U */
    /* options added to the node's (convert: the target's key secrets) */
    const QDict *extra;
} ImgOpenOptions;

/*
 * The options that sub-commands share, with one meaning everywhere,
 * parsed by img_getopt(): -h/--help, -f/--format (the format of the
 * image, of the first or source image where there are several),
 * --image-opts, -U/--force-share, -q, --output and --object (which
 * creates the object when it is seen, so that options after it can name
 * it, as in qemu-img).
 */
typedef struct ImgCommonOpts {
    ImgOpenOptions open;    /* fmt, image_opts, force_share */
    const char *output;     /* --output, for img_parse_output() */
    bool quiet;             /* -q */
} ImgCommonOpts;

/*
 * The shared long options a sub-command accepts (--help always): qemu-img's
 * sub-commands differ there, and getopt_long's abbreviations ("--out")
 * depend on the exact set, so each names its own.
 */
typedef enum ImgLongOpts {
    IMG_LONG_FORMAT      = 1 << 0,  /* --format */
    IMG_LONG_OUTPUT      = 1 << 1,  /* --output */
    IMG_LONG_IMAGE_OPTS  = 1 << 2,  /* --image-opts */
    IMG_LONG_FORCE_SHARE = 1 << 3,  /* --force-share */
    IMG_LONG_OBJECT      = 1 << 4,  /* --object, created at once */
} ImgLongOpts;

/* Values of the shared long-only options; a sub-command's own start at
 * IMG_OPTION_OWN. */
enum {
    IMG_OPTION_OUTPUT = 256,
    IMG_OPTION_IMAGE_OPTS,
    IMG_OPTION_OBJECT,
    IMG_OPTION_OWN,
};

/*
 * getopt_long() for a sub-command: @shortopts are all the short options
 * it accepts (starting with ':'), @shared the shared long options and
 * @own its own long options (NULL-terminated, may be NULL).  Handles the
 * shared options (short ones only where @shortopts names them) by
 * storing them in @co, and getopt's complaints and -h as every
 * sub-command does (these exit); returns the next option that only the
 * sub-command knows, or -1 after the last.
 */
int img_getopt(int argc, char **argv, const char *shortopts,
               unsigned shared, const struct option *own, ImgCommonOpts *co);


/*
 * Opens @name as qemu-img does; on failure prints "Could not open 'name':
 * <reason>" and returns NULL.
 */
BlockBackend *img_open(const char *name, const ImgOpenOptions *o);
/* Applies a -t/-T cache mode to @o; returns -1 on an unknown mode. */
int img_parse_cache(const char *mode, ImgOpenOptions *o);
/*
 * The format driver named @fmt, or NULL after printing qemu-img's
 * "Unknown file format 'fmt'".
 */
const BlockDriver *img_find_format(const char *fmt);

/*
 * Progress meter ("    (12.34/100%)\r"), printed when the value moved by
 * more than @min_skip percent, at 0 and at 100; img_progress_end() ends
 * the line.  Does nothing when disabled.
 */
typedef struct ImgProgress {
    bool enabled;
    double min_skip;
    double last_print;
    double current;
} ImgProgress;

void img_progress_init(ImgProgress *p, bool enabled, double min_skip);
void img_progress_print(ImgProgress *p, double delta, double max);
void img_progress_end(ImgProgress *p);

/* Sub-commands. */
int img_create(int argc, char **argv);
int img_resize(int argc, char **argv);
int img_info(int argc, char **argv);
int img_map(int argc, char **argv);
int img_check(int argc, char **argv);
int img_convert(int argc, char **argv);
int img_dd(int argc, char **argv);
int img_compare(int argc, char **argv);
int img_bench(int argc, char **argv);
int img_bitmap(int argc, char **argv);
int img_snapshot(int argc, char **argv);
int img_measure(int argc, char **argv);
int img_amend(int argc, char **argv);
int img_rebase(int argc, char **argv);
int img_commit(int argc, char **argv);

/* img-snapshot.c: "Snapshot list:" and the table, as qemu-img prints
 * them (snapshot -l, info). */
typedef struct QEMUSnapshotInfo QEMUSnapshotInfo;
void img_snapshot_print_list(const QEMUSnapshotInfo *tab, int n);

#endif
