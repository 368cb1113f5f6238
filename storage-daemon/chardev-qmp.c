/*
 * The character device commands of the storage daemon, as
 * qemu-storage-daemon's (qapi/char.json): query-chardev,
 * query-chardev-backends, chardev-add, chardev-change, chardev-remove,
 * chardev-send-break, ringbuf-write and ringbuf-read, over chardev.h.
 */
#include "chardev-qmp.h"

#include "chardev.h"
#include "qmp-dispatch.h"

/*
 * chardev-add's ChardevBackend ({"type": T, "data": {...}}) as the flat
 * ChardevOptions that --chardev gives chardev_add(); NULL with @errp set
 * if it asks for what a QMP command cannot have.
 */
static JsonObject *chardev_qmp_options(const char *id, JsonObject *backend,
                                       Error **errp)
{
    const char *type = json_object_get_string_member(backend, "type");
    JsonObject *data = json_object_get_object_member(backend, "data");
    g_autoptr(JsonObject) opts = json_object_new();

    json_object_set_string_member(opts, "id", id);
    json_object_set_string_member(opts, "backend", type);
    if (!strcmp(type, "file")) {
        json_object_set_string_member(opts, "path",
                                      json_object_get_string_member(data,
                                                                    "out"));
        if (json_object_has_member(data, "in")) {
            json_object_set_string_member(
                opts, "input-path", json_object_get_string_member(data, "in"));
        }
        if (json_object_has_member(data, "append")) {
            json_object_set_boolean_member(
                opts, "append", json_object_get_boolean_member(data,
                                                               "append"));
        }
    } else if (!strcmp(type, "ringbuf") || !strcmp(type, "memory")) {
        if (json_object_has_member(data, "size")) {
            json_object_set_int_member(opts, "size",
                                       json_object_get_int_member(data,
                                                                  "size"));
        }
    } else if (!strcmp(type, "socket")) {
        /* SocketAddressLegacy: {"type": T, "data": {members}} */
        JsonObject *addr = json_object_get_object_member(data, "addr");
        const char *addr_type = json_object_get_string_member(addr, "type");
        JsonObject *members = json_object_get_object_member(addr, "data");

        if (!strcmp(addr_type, "unix")) {
            json_object_set_string_member(
                opts, "path", json_object_get_string_member(members, "path"));
        } else if (!strcmp(addr_type, "inet")) {
            json_object_set_string_member(
                opts, "host", json_object_get_string_member(members, "host"));
            json_object_set_string_member(
                opts, "port", json_object_get_string_member(members, "port"));
        } else {
            /* fd: a number names no descriptor over QMP (sockets.h) */
            json_object_set_string_member(
                opts, "fd", json_object_get_string_member(members, "str"));
        }
        /* over QMP a socket listens unless told not to */
        json_object_set_boolean_member(
            opts, "server", json_object_get_boolean_member_with_default(
                                data, "server", true));
        /*
         * Waiting for the first client would stop the monitor (QEMU's
         * does stop, for ever if none comes): a server added at run time
         * never waits.
         */
        if (json_object_get_boolean_member_with_default(data, "wait",
                                                        false)) {
            error_setg(errp, "chardev '%s': wait=true would stop the "
                       "monitor until a client connects; use wait=false",
                       id);
            return NULL;
        }
        json_object_set_boolean_member(opts, "wait", false);
    }
    return g_steal_pointer(&opts);
}

static void qmp_chardev_add(JsonObject *args, JsonNode **ret, Error **errp)
{
    const char *id = json_object_get_string_member(args, "id");
    g_autoptr(JsonObject) opts = NULL;
    Error *err = NULL;

    if (chardev_find(id, NULL)) {
        error_setg(errp, "Chardev with id '%s' already exists", id);
        return;
    }
    opts = chardev_qmp_options(id, json_object_get_object_member(args,
                                                                 "backend"),
                               errp);
    if (opts && !chardev_add(opts, &err)) {
        error_propagate_prepend(errp, err, "Failed to add chardev '%s': ",
                                id);
    }
}

static void qmp_chardev_change(JsonObject *args, JsonNode **ret,
                               Error **errp)
{
    const char *id = json_object_get_string_member(args, "id");
    g_autoptr(JsonObject) opts = NULL;

    if (!chardev_find(id, NULL)) {
        error_setg(errp, "Chardev '%s' does not exist", id);
        return;
    }
    opts = chardev_qmp_options(id, json_object_get_object_member(args,
                                                                 "backend"),
                               errp);
    if (opts) {
        chardev_change(opts, errp);
    }
}

static void qmp_chardev_remove(JsonObject *args, JsonNode **ret,
                               Error **errp)
{
    chardev_remove(json_object_get_string_member(args, "id"), errp);
}

static void qmp_chardev_send_break(JsonObject *args, JsonNode **ret,
                                   Error **errp)
{
    const char *id = json_object_get_string_member(args, "id");

    /* no device of the daemon has a line to send a break on */
    if (!chardev_find(id, NULL)) {
        error_setg(errp, "Chardev '%s' not found", id);
    }
}

static void chardev_info_add(Chardev *chr, void *opaque)
{
    JsonArray *list = opaque;
    JsonObject *info = json_object_new();
    g_autofree char *filename = chardev_filename(chr);

    /* QEMU's member order */
    json_object_set_boolean_member(info, "frontend-open",
                                   chardev_has_user(chr));
    json_object_set_string_member(info, "filename", filename);
    json_object_set_string_member(info, "label", chardev_id(chr));
    json_array_add_object_element(list, info);
}

static void qmp_query_chardev(JsonObject *args, JsonNode **ret,
                              Error **errp)
{
    JsonArray *list = json_array_new();

    chardev_foreach(chardev_info_add, list);
    *ret = json_node_init_array(json_node_alloc(), list);
    json_array_unref(list);
}

static void qmp_query_chardev_backends(JsonObject *args, JsonNode **ret,
                                       Error **errp)
{
    static const char *const names[] = {
        "null", "ringbuf", "stdio", "socket", "file", "memory",
    };
    JsonArray *list = json_array_new();

    for (size_t i = 0; i < G_N_ELEMENTS(names); i++) {
        JsonObject *info = json_object_new();

        json_object_set_string_member(info, "name", names[i]);
        json_array_add_object_element(list, info);
    }
    *ret = json_node_init_array(json_node_alloc(), list);
    json_array_unref(list);
}

/* ringbuf-write and ringbuf-read's format: true for base64 */
static bool chardev_base64(JsonObject *args)
{
    return !strcmp(json_object_get_string_member_with_default(
                       args, "format", "utf8"), "base64");
}

static void qmp_ringbuf_write(JsonObject *args, JsonNode **ret,
                              Error **errp)
{
    const char *data = json_object_get_string_member(args, "data");
    g_autofree guchar *decoded = NULL;
    gsize len = strlen(data);

    if (chardev_base64(args)) {
        /* g_base64_decode() skips what is not base64; QEMU refuses it */
        for (const char *p = data; *p; p++) {
            if (!g_ascii_isalnum(*p) && !strchr("+/=", *p)) {
                error_setg(errp, "Base64 data contains invalid characters");
                return;
            }
        }
        decoded = g_base64_decode(data, &len);
    }
    chardev_ringbuf_write(json_object_get_string_member(args, "device"),
                          decoded ? decoded : (const guchar *)data, len,
                          errp);
}

static void qmp_ringbuf_read(JsonObject *args, JsonNode **ret,
                             Error **errp)
{
    g_autoptr(GByteArray) bytes = chardev_ringbuf_read(
        json_object_get_string_member(args, "device"),
        json_object_get_int_member(args, "size"), errp);
    g_autofree char *text = NULL;

    if (!bytes) {
        return;
    }
    if (chardev_base64(args)) {
        text = g_base64_encode(bytes->data, bytes->len);
    } else {
        /* bytes up to a NUL, as QEMU returns them; the JSON writer
         * writes what is not UTF-8 as U+FFFD */
        text = bytes->len ? g_strndup((const char *)bytes->data, bytes->len)
                          : g_strdup("");
    }
    *ret = json_node_init_string(json_node_alloc(), text);
}

static const struct {
    const char *name;
    QmpCommandFunc *fn;
} chardev_commands[] = {
    { "query-chardev", qmp_query_chardev },
    { "query-chardev-backends", qmp_query_chardev_backends },
    { "chardev-add", qmp_chardev_add },
    { "chardev-change", qmp_chardev_change },
    { "chardev-remove", qmp_chardev_remove },
    { "chardev-send-break", qmp_chardev_send_break },
    { "ringbuf-write", qmp_ringbuf_write },
    { "ringbuf-read", qmp_ringbuf_read },
};

void chardev_register_commands(bool (*wanted)(const char *name))
{
    for (size_t i = 0; i < G_N_ELEMENTS(chardev_commands); i++) {
        if (!wanted || wanted(chardev_commands[i].name)) {
            qmp_register_command(chardev_commands[i].name,
                                 chardev_commands[i].fn);
        }
    }
}
