/*
 * fuzz-options: the option strings a user or a management tool passes on
 * a command line or in an image's json: filename, through the parsers
 * that read them and the schema checks that follow:
 *
 *  - keyval (--blockdev, --export, --nbd-server, --chardev, --monitor):
 *    keyval_parse() and qapi_input_from_keyval() against the type the
 *    option stands for;
 *  - QemuOpts strings (--image-opts, qemu-io's open -o):
 *    keyval_parse_flat() and the drivers' runtime option tables;
 *  - qemu-img create -o: qemu_opts_parse() of the qcow2 and file create
 *    options, then the enum checks;
 *  - json: filenames: qdict_from_json() as bdrv_open() reads the text
 *    after "json:", the drivers' runtime tables absorbing the result, and
 *    its serialisation back;
 *  - a QMP-style JSON value: json_parse_text() and qapi_check_input().
 *
 * Nothing is opened: a json: filename reaches the parser bdrv_open()
 * uses, not the driver it names, since an arbitrary driver would touch
 * host files.
 *
 * The first byte chooses the parser and its type; the rest is the string.
 */
#include "block/block_int.h"
#include "qapi/qapi-opts.h"
#include "qapi/qapi-qmp.h"
#include "util/json.h"
#include "util/qapi-schema.h"
#include "util/qdict.h"
#include "util/qemu-option.h"

/* Command-line options of the schema, with their implied key. */
static const struct {
    const QapiType *type;
    const char *implied_key;
} fuzz_options_keyval_types[] = {
    { &qapi_type_BlockdevOptions, NULL },
    { &qapi_type_BlockExportOptions, "type" },
    { &qapi_type_NbdServerOptions, NULL },
    { &qapi_type_ChardevOptions, "backend" },
    { &qapi_type_MonitorOptions, NULL },
    { &qapi_type_SocketAddress, NULL },
};

/* The runtime tables that --image-opts and json: options are read with. */
static const QemuOptsList *const fuzz_options_runtime_lists[] = {
    &qapi_opts_bdrv_common,
    &qapi_opts_qcow2_runtime,
    &qapi_opts_file_runtime,
    &qapi_opts_raw_runtime,
    &qapi_opts_null_runtime,
    &qapi_opts_blkdebug_runtime,
    &qapi_opts_blkcrash_runtime,
};

static void fuzz_options_keyval(unsigned sel, const char *text)
{
    unsigned n = G_N_ELEMENTS(fuzz_options_keyval_types);
    Error *err = NULL;
    QDict *qdict = keyval_parse(text, fuzz_options_keyval_types[sel % n]
                                      .implied_key, &err);
    JsonNode *node;

    if (!qdict) {
        error_free(err);
        return;
    }
    node = qapi_input_from_keyval(fuzz_options_keyval_types[sel % n].type,
                                  qdict, &err);
    error_free(err);
    if (node) {
        g_free(json_to_text(node, 0));
        json_node_unref(node);
    }
    qdict_unref(qdict);
}

/* Each table takes its options out of @qdict, as a driver's open does. */
static void fuzz_options_absorb(QDict *qdict)
{
    for (size_t i = 0; i < G_N_ELEMENTS(fuzz_options_runtime_lists); i++) {
        Error *err = NULL;
        QemuOpts *opts = qemu_opts_absorb_qdict(fuzz_options_runtime_lists[i],
                                                qdict, &err);

        error_free(err);
        if (opts) {
            qemu_opts_del(opts);
        }
    }
}

static void fuzz_options_image_opts(const char *text)
{
    Error *err = NULL;
    QDict *qdict = keyval_parse_flat(text, "filename", &err);

    error_free(err);
    if (qdict) {
        fuzz_options_absorb(qdict);
        qdict_unref(qdict);
    }
}

static void fuzz_options_create(const char *text)
{
    QemuOptsList *list = qemu_opts_append(NULL, &qapi_opts_qcow2_create);
    Error *err = NULL;
    QemuOpts *opts;

    list = qemu_opts_append(list, &qapi_opts_file_create);
    opts = qemu_opts_parse(list, text, &err);
    error_free(err);
    err = NULL;
    if (opts) {
        qemu_opts_check_enums(opts, &err);
        error_free(err);
        qdict_unref(qemu_opts_to_qdict(opts, NULL));
        qemu_opts_del(opts);
    }
    qemu_opts_free(list);
}

static void fuzz_options_json_filename(const char *text)
{
    Error *err = NULL;
    QDict *qdict = qdict_from_json(text, &err);

    error_free(err);
    if (qdict) {
        g_free(qdict_to_json(qdict));
        fuzz_options_absorb(qdict);
        qdict_unref(qdict);
    }
}

static void fuzz_options_qmp_value(unsigned sel, const char *text)
{
    unsigned n = G_N_ELEMENTS(fuzz_options_keyval_types);
    Error *err = NULL;
    JsonNode *node = json_parse_text(text, strlen(text), &err);

    error_free(err);
    err = NULL;
    if (node) {
        qapi_check_input(fuzz_options_keyval_types[sel % n].type, node,
                         QAPI_INPUT_JSON, &err);
        error_free(err);
        json_node_unref(node);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_autofree char *text = NULL;
    unsigned sel;

    if (size < 1) {
        return 0;
    }
    sel = data[0];
    /* the parsers take C strings, as they come from argv or a header */
    text = g_strndup((const char *)data + 1, size - 1);
    switch (sel % 5) {
    case 0:
        fuzz_options_keyval(sel / 5, text);
        break;
    case 1:
        fuzz_options_image_opts(text);
        break;
    case 2:
        fuzz_options_create(text);
        break;
    case 3:
        fuzz_options_json_filename(text);
        break;
    default:
        fuzz_options_qmp_value(sel / 5, text);
        break;
    }
    return 0;
}
