/*
 * The tls-cipher-suites object type (see
 * include/crypto/tls-cipher-suites.h).
 *
 * QEMU computes the list only when a device asks for it, so its
 * qemu-storage-daemon, which has none, never does and takes any priority
 * string.  qblock computes it when the object is created and when
 * qom-set changes the priority: a priority GnuTLS refuses is an error of
 * --object / object-add, in the words QEMU gives when its firmware asks.
 */
#include "crypto/tls-cipher-suites.h"

#include "tls-lib.h"

#include "util/json.h"
#include "util/user-object.h"

#define TLS_CIPHER_SUITES_TYPE "tls-cipher-suites"

typedef struct TlsCipherSuites {
    /* a TLS credentials object's properties, kept for qom-get */
    char *endpoint;
    char *dir;                  /* NULL when unset */
    bool verify_peer;
    char *priority;
    GByteArray *suites;         /* what priority allows, 2 bytes each */
} TlsCipherSuites;

GByteArray *qcrypto_tls_cipher_suites_compute(const char *priority,
                                              Error **errp)
{
    g_autoptr(GByteArray) suites = NULL;
    gnutls_priority_t cache;
    int ret;

    if (!qtls_lib_load(errp)) {
        return NULL;
    }
    ret = qtls_lib.gnutls_priority_init(&cache, priority, NULL);
    if (ret < 0) {
        error_setg(errp, "Syntax error using priority '%s': %s", priority,
                   qtls_lib.gnutls_strerror(ret));
        return NULL;
    }
    suites = g_byte_array_new();
    for (unsigned i = 0;; i++) {
        unsigned char id[2];
        unsigned index;

        ret = qtls_lib.gnutls_priority_get_cipher_suite_index(cache, i,
                                                              &index);
        if (ret == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE) {
            break;          /* past the last suite of the priority */
        }
        /*
         * GnuTLS walks every combination of the priority's ciphers, MACs
         * and key exchanges; those no suite has are skipped.
         */
        if (ret < 0 ||
            !qtls_lib.gnutls_cipher_suite_info(index, id, NULL, NULL, NULL,
                                               NULL)) {
            continue;
        }
        g_byte_array_append(suites, id, sizeof(id));
    }
    qtls_lib.gnutls_priority_deinit(cache);
    return g_steal_pointer(&suites);
}

static void tls_cipher_suites_destroy(void *state)
{
    TlsCipherSuites *s = state;

    if (s->suites) {
        g_byte_array_unref(s->suites);
    }
    g_free(s->endpoint);
    g_free(s->dir);
    g_free(s->priority);
    g_free(s);
}

/* A new priority: the list computed again, kept as it was on error. */
static bool tls_cipher_suites_set_priority(TlsCipherSuites *s,
                                           const char *priority,
                                           Error **errp)
{
    GByteArray *suites = qcrypto_tls_cipher_suites_compute(priority, errp);

    if (!suites) {
        return false;
    }
    if (s->suites) {
        g_byte_array_unref(s->suites);
    }
    s->suites = suites;
    g_free(s->priority);
    s->priority = g_strdup(priority);
    return true;
}

static void *tls_cipher_suites_create(const char *id, JsonObject *props,
                                      Error **errp)
{
    TlsCipherSuites *s;
    const char *priority = json_object_get_string_member_with_default(
        props, "priority", NULL);

    if (!priority) {
        error_setg(errp, "'priority' property is not set");     /* QEMU's */
        return NULL;
    }
    s = g_new0(TlsCipherSuites, 1);
    s->endpoint = g_strdup(json_object_get_string_member_with_default(
        props, "endpoint", "client"));
    s->dir = g_strdup(json_object_get_string_member_with_default(
        props, "dir", NULL));
    s->verify_peer = json_object_get_boolean_member_with_default(
        props, "verify-peer", true);
    if (!tls_cipher_suites_set_priority(s, priority, errp)) {
        tls_cipher_suites_destroy(s);
        return NULL;
    }
    return s;
}

/* qom-set: as QEMU, any of the four; a new priority is checked at once. */
static bool tls_cipher_suites_set_property(void *state, const char *name,
                                           JsonNode *value, Error **errp)
{
    TlsCipherSuites *s = state;
    char **field;

    if (!strcmp(name, "cipher-suites")) {
        error_setg(errp, "Property '%s.%s' is not writable",
                   TLS_CIPHER_SUITES_TYPE, name);
        return false;
    }
    if (!user_object_check_property(TLS_CIPHER_SUITES_TYPE, name, value,
                                    errp)) {
        return false;
    }
    if (!strcmp(name, "priority")) {
        return tls_cipher_suites_set_priority(s, json_node_get_string(value),
                                              errp);
    }
    if (!strcmp(name, "verify-peer")) {
        s->verify_peer = json_node_get_boolean(value);
        return true;
    }
    field = !strcmp(name, "dir") ? &s->dir : &s->endpoint;
    g_free(*field);
    *field = g_strdup(json_node_get_string(value));
    return true;
}

static JsonNode *tls_cipher_suites_get_property(void *state,
                                                const char *name)
{
    TlsCipherSuites *s = state;
    JsonNode *node = json_node_alloc();

    if (!strcmp(name, "cipher-suites")) {
        g_autoptr(JsonArray) bytes = json_array_sized_new(s->suites->len);

        for (guint i = 0; i < s->suites->len; i++) {
            json_array_add_int_element(bytes, s->suites->data[i]);
        }
        return json_node_init_array(node, bytes);
    }
    if (!strcmp(name, "verify-peer")) {
        return json_node_init_boolean(node, s->verify_peer);
    }
    /* an unset string reads "", as QEMU's */
    if (!strcmp(name, "dir")) {
        return json_node_init_string(node, s->dir ? s->dir : "");
    }
    if (!strcmp(name, "endpoint")) {
        return json_node_init_string(node, s->endpoint);
    }
    if (!strcmp(name, "priority")) {
        return json_node_init_string(node, s->priority);
    }
    json_node_unref(node);
    return NULL;
}

/* qom-list's order, as QEMU's (the schema's is QEMU's declaration order) */
static const char *const tls_cipher_suites_qom_list[] = {
    "endpoint", "dir", "verify-peer", "priority", NULL,
};

static const UserObjectType tls_cipher_suites_type = {
    .name = TLS_CIPHER_SUITES_TYPE,
    .qom_list_order = tls_cipher_suites_qom_list,
    .create = tls_cipher_suites_create,
    .destroy = tls_cipher_suites_destroy,
    .set_property = tls_cipher_suites_set_property,
    .get_property = tls_cipher_suites_get_property,
};
user_object_type_init(tls_cipher_suites_type)
