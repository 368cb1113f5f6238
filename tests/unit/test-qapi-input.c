/*
 * Input checked against the QMP schema: QMP arguments (JSON types) and
 * keyval options (strings converted), with the messages QEMU 7.2's
 * qemu-storage-daemon prints for the same input.
 */
#include "util/qapi-schema.h"
#include "qapi-qmp.h"

static JsonNode *parse(const char *text)
{
    JsonNode *node = json_parse_text(text, strlen(text), &error_abort);

    return node;
}

static void check_json(const QapiType *type, const char *text,
                       const char *expect_err)
{
    JsonNode *node = parse(text);
    Error *err = NULL;
    bool ok = qapi_check_input(type, node, QAPI_INPUT_JSON, &err);

    if (!expect_err) {
        if (!ok) {
            g_error("%s refused: %s", text, error_get_pretty(err));
        }
    } else {
        g_assert_false(ok);
        g_assert_cmpstr(error_get_pretty(err), ==, expect_err);
        error_free(err);
    }
    json_node_unref(node);
}

static void test_json_struct(void)
{
    const QapiType *args = qapi_find_command("blockdev-del")->args;

    check_json(args, "{\"node-name\": \"a\"}", NULL);
    check_json(args, "{}", "Parameter 'node-name' is missing");
    check_json(args, "{\"node-name\": 3}",
               "Invalid parameter type for 'node-name', expected: string");
    check_json(args, "{\"node-name\": \"a\", \"x\": 1}",
               "Parameter 'x' is unexpected");
    /* open structs pass on what they do not declare */
    check_json(&qapi_type_BlockdevOptions,
               "{\"driver\": \"file\", \"filename\": \"x\"}", NULL);
    check_json(&qapi_type_BlockdevOptions, "{\"filename\": \"x\"}",
               "Parameter 'driver' is missing");
}

static void test_json_lists_enums(void)
{
    const QapiType *args = qapi_find_command("qmp_capabilities")->args;

    check_json(args, "{\"enable\": []}", NULL);
    check_json(args, "{\"enable\": [\"oob\"]}", NULL);
    check_json(args, "{\"enable\": \"oob\"}",
               "Invalid parameter type for 'enable', expected: array");
    check_json(args, "{\"enable\": [\"bogus\"]}",
               "Parameter 'enable[0]' does not accept value 'bogus'");
    check_json(args, "{\"enable\": [1]}",
               "Invalid parameter type for 'enable[0]', expected: string");
    /* QEMU's visitors: a list element out of range is named 'null' */
    args = &qapi_type_ThreadContextProperties;
    check_json(args, "{\"cpu-affinity\": [0, 65535]}", NULL);
    check_json(args, "{\"cpu-affinity\": [0, 65536]}",
               "Parameter 'null' expects uint16_t");
    check_json(args, "{\"cpu-affinity\": [-1]}",
               "Parameter 'null' expects uint16_t");
    check_json(args, "{\"cpu-affinity\": [\"a\"]}",
               "Parameter 'cpu-affinity[0]' expects uint64");
}

static void test_json_unions(void)
{
    const QapiType *start = qapi_find_command("nbd-server-start")->args;

    check_json(start, "{\"addr\": {\"type\": \"unix\", "
               "\"data\": {\"path\": \"/x\"}}}", NULL);
    check_json(start, "{\"addr\": {\"type\": \"unix\", \"path\": \"/x\"}}",
               "Parameter 'addr.data' is missing");
    check_json(start, "{\"addr\": {\"type\": \"unix\", "
               "\"data\": {\"path\": \"/x\", \"port\": \"1\"}}}",
               "Parameter 'addr.data.port' is unexpected");
    check_json(start, "{\"addr\": {\"type\": \"vsock\"}}",
               "Parameter 'type' does not accept value 'vsock'");
    check_json(start, "{\"addr\": {\"type\": \"inet\", \"data\": "
               "{\"host\": \"h\", \"port\": \"1\"}}, \"max-connections\": -1}",
               "Parameter 'max-connections' expects uint32_t");
    check_json(&qapi_type_BlockExportOptions,
               "{\"type\": \"nbd\", \"id\": \"e\", \"node-name\": \"n\", "
               "\"name\": \"x\", \"allocation-depth\": true}", NULL);
    /* members of another variant are unexpected */
    check_json(&qapi_type_BlockExportOptions,
               "{\"type\": \"nbd\", \"id\": \"e\", \"node-name\": \"n\", "
               "\"num-queues\": 2}", "Parameter 'num-queues' is unexpected");
    check_json(&qapi_type_BlockExportOptions,
               "{\"type\": \"vhost-user-blk\", \"id\": \"e\", "
               "\"node-name\": \"n\", \"addr\": {\"type\": \"unix\", "
               "\"path\": \"/s\"}, \"num-queues\": 65536}",
               "Parameter 'num-queues' expects uint16_t");
    check_json(&qapi_type_BlockExportOptions,
               "{\"type\": \"nbd\", \"id\": \"e\", \"node-name\": \"n\", "
               "\"writable\": \"on\"}",
               "Invalid parameter type for 'writable', expected: boolean");
}

/* Keyval @params against @type: the JSON it becomes, or the error. */
static void check_keyval(const QapiType *type, const char *params,
                         const char *implied, const char *expect)
{
    g_autoptr(QDict) qdict = keyval_parse(params, implied, &error_abort);
    Error *err = NULL;
    JsonNode *node = qapi_input_from_keyval(type, qdict, &err);

    if (node) {
        g_autofree char *text = json_to_text(node, 0);

        g_assert_cmpstr(text, ==, expect);
        json_node_unref(node);
    } else {
        g_assert_cmpstr(error_get_pretty(err), ==, expect);
        error_free(err);
    }
}

static void test_keyval(void)
{
    const QapiType *exp = &qapi_type_BlockExportOptions;

    check_keyval(exp, "nbd,id=e0,node-name=n,writable=on", "type",
                 "{\"type\": \"nbd\", \"id\": \"e0\", \"node-name\": \"n\", "
                 "\"writable\": true}");
    check_keyval(exp, "type=nbd", NULL, "Parameter 'id' is missing");
    check_keyval(exp, "type=nbd,id=e0,node-name=x,writable=maybe", NULL,
                 "Parameter 'writable' expects 'on' or 'off'");
    check_keyval(exp, "type=bogus,id=e0,node-name=x", NULL,
                 "Parameter 'type' does not accept value 'bogus'");
    check_keyval(exp, "nbd,id=e0,node-name=x,bogus=1", "type",
                 "Parameter 'bogus' is unexpected");
    check_keyval(exp, "type=vhost-user-blk,id=e0,node-name=x,num-queues=abc,"
                 "addr.type=unix,addr.path=/tmp/x", NULL,
                 "Parameter 'num-queues' expects integer");
    check_keyval(exp, "type=vhost-user-blk,id=e0,node-name=x,"
                 "logical-block-size=abc,addr.type=unix,addr.path=/tmp/x",
                 NULL, "Parameter 'logical-block-size' expects size");
    check_keyval(exp, "type=vhost-user-blk,id=e0,node-name=x,"
                 "logical-block-size=4k,addr.type=unix,addr.path=/s", NULL,
                 "{\"type\": \"vhost-user-blk\", \"id\": \"e0\", "
                 "\"node-name\": \"x\", \"logical-block-size\": 4096, "
                 "\"addr\": {\"type\": \"unix\", \"path\": \"/s\"}}");
    check_keyval(exp, "type=nbd,id=e,node-name=n,bitmaps.0=a,bitmaps.1=b",
                 NULL, "{\"type\": \"nbd\", \"id\": \"e\", "
                 "\"node-name\": \"n\", \"bitmaps\": [\"a\", \"b\"]}");
    check_keyval(&qapi_type_NbdServerOptions, "addr.type=unix", NULL,
                 "Parameter 'addr.path' is missing");
    check_keyval(&qapi_type_NbdServerOptions,
                 "addr.type=unix,addr.path=/n,max-connections=-1", NULL,
                 "Parameter 'max-connections' expects uint32_t");
    check_keyval(&qapi_type_MonitorOptions, "m0,pretty=maybe", "chardev",
                 "Parameter 'pretty' expects 'on' or 'off'");
    /* a list element by its keyval name, as QEMU's keyval visitor */
    check_keyval(&qapi_type_ThreadContextProperties,
                 "cpu-affinity.0=1,cpu-affinity.1=x", NULL,
                 "Parameter 'cpu-affinity.1' expects integer");
    check_keyval(&qapi_type_ThreadContextProperties, "cpu-affinity.0=65536",
                 NULL, "Parameter 'null' expects uint16_t");
    check_keyval(&qapi_type_ThreadContextProperties,
                 "node-affinity.0=0,node-affinity.1=3", NULL,
                 "{\"node-affinity\": [0, 3]}");
}

static void test_tables(void)
{
    /* every command's arguments are an object type */
    for (const QapiCommand *c = qapi_commands; c->name; c++) {
        g_assert_true(c->args->kind == QAPI_KIND_STRUCT ||
                      c->args->kind == QAPI_KIND_UNION);
    }
    g_assert_nonnull(qapi_find_event("BLOCK_IMAGE_CORRUPTED"));
    g_assert_null(qapi_find_event("NO_SUCH_EVENT"));
    g_assert_null(qapi_find_command("no-such-command"));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/qapi-input/json-struct", test_json_struct);
    g_test_add_func("/qapi-input/json-lists-enums", test_json_lists_enums);
    g_test_add_func("/qapi-input/json-unions", test_json_unions);
    g_test_add_func("/qapi-input/keyval", test_keyval);
    g_test_add_func("/qapi-input/tables", test_tables);
    return g_test_run();
}
