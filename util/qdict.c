/*
 * Flat, insertion-ordered option dictionaries.
 *
 * Entries live in a doubly linked list (the order users wrote them in,
 * which is also the order json: filenames print them) and are found
 * through a hash table from key to entry.
 *
 * Invariants:
 *  1. Every list entry is in the hash table under its key and vice versa.
 *  2. value is NULL exactly when type is QTYPE_QNULL.
 *  3. The text of a QTYPE_QBOOL entry is "true" or "false".
 */
#include "util/qdict.h"

struct QDictEntry {
    char *key;
    char *value;
    QType type;
    QDictEntry *prev;
    QDictEntry *next;
};

struct QDict {
    int refcnt;
    GHashTable *index;
    QDictEntry *head;
    QDictEntry *tail;
};

QDict *qdict_new(void)
{
    QDict *qdict = g_new0(QDict, 1);

    qdict->refcnt = 1;
    qdict->index = g_hash_table_new(g_str_hash, g_str_equal);
    return qdict;
}

QDict *qdict_ref(QDict *qdict)
{
    g_atomic_int_inc(&qdict->refcnt);
    return qdict;
}

static void qdict_entry_free(QDictEntry *entry)
{
    g_free(entry->key);
    g_free(entry->value);
    g_free(entry);
}

void qdict_unref(QDict *qdict)
{
    QDictEntry *entry, *next;

    if (!qdict || !g_atomic_int_dec_and_test(&qdict->refcnt)) {
        return;
    }
    for (entry = qdict->head; entry; entry = next) {
        next = entry->next;
        qdict_entry_free(entry);
    }
    g_hash_table_destroy(qdict->index);
    g_free(qdict);
}

static QDictEntry *qdict_find(const QDict *qdict, const char *key)
{
    return g_hash_table_lookup(qdict->index, key);
}

void qdict_put_typed(QDict *qdict, const char *key, const char *value,
                     QType type)
{
    QDictEntry *entry = qdict_find(qdict, key);

    assert((type == QTYPE_QNULL) == (value == NULL));
    if (entry) {
        /* A repeated key keeps its first position, as QEMU prints it. */
        g_free(entry->value);
    } else {
        entry = g_new0(QDictEntry, 1);
        entry->key = g_strdup(key);
        entry->prev = qdict->tail;
        if (qdict->tail) {
            qdict->tail->next = entry;
        } else {
            qdict->head = entry;
        }
        qdict->tail = entry;
        g_hash_table_insert(qdict->index, entry->key, entry);
    }
    entry->value = g_strdup(value);
    entry->type = type;
}

void qdict_put_str(QDict *qdict, const char *key, const char *value)
{
    qdict_put_typed(qdict, key, value, QTYPE_QSTRING);
}

void qdict_put_int(QDict *qdict, const char *key, int64_t value)
{
    char text[24];

    snprintf(text, sizeof(text), "%" PRId64, value);
    qdict_put_typed(qdict, key, text, QTYPE_QNUM);
}

void qdict_put_bool(QDict *qdict, const char *key, bool value)
{
    qdict_put_typed(qdict, key, value ? "true" : "false", QTYPE_QBOOL);
}

void qdict_set_default_str(QDict *qdict, const char *key, const char *value)
{
    if (!qdict_haskey(qdict, key)) {
        qdict_put_str(qdict, key, value);
    }
}

const char *qdict_get_try_str(const QDict *qdict, const char *key)
{
    QDictEntry *entry = qdict_find(qdict, key);

    return entry ? entry->value : NULL;
}

bool qdict_haskey(const QDict *qdict, const char *key)
{
    return qdict_find(qdict, key) != NULL;
}

bool qdict_del(QDict *qdict, const char *key)
{
    QDictEntry *entry = qdict_find(qdict, key);

    if (!entry) {
        return false;
    }
    g_hash_table_remove(qdict->index, key);
    if (entry->prev) {
        entry->prev->next = entry->next;
    } else {
        qdict->head = entry->next;
    }
    if (entry->next) {
        entry->next->prev = entry->prev;
    } else {
        qdict->tail = entry->prev;
    }
    qdict_entry_free(entry);
    return true;
}

size_t qdict_size(const QDict *qdict)
{
    return g_hash_table_size(qdict->index);
}

const QDictEntry *qdict_first(const QDict *qdict)
{
    return qdict->head;
}

const QDictEntry *qdict_next(const QDict *qdict, const QDictEntry *entry)
{
    return entry->next;
}

const char *qdict_entry_key(const QDictEntry *entry)
{
    return entry->key;
}

const char *qdict_entry_value(const QDictEntry *entry)
{
    return entry->value;
}

QType qdict_entry_type(const QDictEntry *entry)
{
    return entry->type;
}

QDict *qdict_clone(const QDict *src)
{
    QDict *dst = qdict_new();

    qdict_join(dst, src, true);
    return dst;
}

void qdict_join(QDict *dst, const QDict *src, bool overwrite)
{
    for (QDictEntry *e = src->head; e; e = e->next) {
        if (overwrite || !qdict_haskey(dst, e->key)) {
            qdict_put_typed(dst, e->key, e->value, e->type);
        }
    }
}

void qdict_extract_subqdict(QDict *src, QDict **dst, const char *prefix)
{
    size_t plen = strlen(prefix);
    QDictEntry *entry, *next;

    *dst = qdict_new();
    for (entry = src->head; entry; entry = next) {
        next = entry->next;
        if (!strncmp(entry->key, prefix, plen)) {
            qdict_put_typed(*dst, entry->key + plen, entry->value,
                            entry->type);
            qdict_del(src, entry->key);
        }
    }
}

bool qdict_has_prefixed_entries(const QDict *qdict, const char *prefix)
{
    size_t plen = strlen(prefix);

    for (QDictEntry *e = qdict->head; e; e = e->next) {
        if (!strncmp(e->key, prefix, plen)) {
            return true;
        }
    }
    return false;
}
