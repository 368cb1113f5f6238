/*
 * User-creatable objects: what QEMU's --object and object-add create
 * (secrets, TLS credentials, iothreads), by type and id.
 *
 * A type is a static const UserObjectType registered once (from a
 * constructor: user_object_type_init()); its properties are declared in
 * qapi/object.json as the variant of the ObjectOptions union that has the
 * type's name, so the command line and QMP check them with the same
 * schema and the same messages before the type sees them.
 *
 * Objects live in one registry of the process, keyed by id; only the main
 * loop thread adds, finds and deletes them.
 *
 * Invariants:
 *  1. Ids are unique across all types, and are QEMU identifiers (letters,
 *     digits, '-', '.', '_', starting with a letter).
 *  2. An object's reference count is 1 (the registry's) plus one per user
 *     that took user_object_ref(); delete is refused while it is above 1
 *     or while the type's can_delete says no.
 *  3. destroy runs exactly once, when the last reference goes.
 */
#ifndef QBLOCK_USER_OBJECT_H
#define QBLOCK_USER_OBJECT_H

#include "util/json.h"
#include "util/osdep.h"
#include "util/error.h"

typedef struct UserObject UserObject;

/* A property qom-get can read but no input sets (thread-context's id). */
typedef struct UserObjectReadOnly {
    const char *name;
    const char *qom_type;       /* as qom-list names its type ("int") */
} UserObjectReadOnly;

typedef struct UserObjectType {
    /* required: the qom-type, also the variant's name in ObjectOptions */
    const char *name;
    /*
     * Required.  Creates the object's state from @props, the object's
     * properties (qom-type and id removed) already checked against the
     * type's schema, so members have their declared JSON types.  Errors
     * name the property and value at fault.  Returns the state (not NULL)
     * or NULL with @errp set.
     */
    void *(*create)(const char *id, JsonObject *props, Error **errp);
    /* required: frees the state; secrets are zeroed first */
    void (*destroy)(void *state);
    /*
     * Optional (NULL: always).  Whether the object may be deleted now
     * beyond the reference count (a TLS object an active server uses);
     * sets @errp with the reason if not.
     */
    bool (*can_delete)(void *state, Error **errp);
    /*
     * Optional (NULL: no property can change after creation).  QMP
     * qom-set of the property @name to @value (any JSON: the type checks
     * it), which takes effect at once.  Returns false with @errp set if
     * @name is no property it can change (the message QEMU gives:
     * "Property 'TYPE.NAME' not found") or @value does not fit it.
     */
    bool (*set_property)(void *state, const char *name, JsonNode *value,
                         Error **errp);
    /*
     * Optional (NULL: only "type" can be read).  QMP qom-get of the
     * property @name: a new value, or NULL if @name is no property it
     * shows (a secret's data is never shown).
     */
    JsonNode *(*get_property)(void *state, const char *name);
    /*
     * Optional, ended by a NULL name: properties beyond the schema's that
     * qom-get reads, listed by qom-list and qom-list-properties before
     * the schema's (QEMU's order); qom-set of one is refused as QEMU
     * does ("Property 'TYPE.NAME' is not writable").
     */
    const UserObjectReadOnly *read_only;
    /*
     * Optional, NULL-terminated: properties of the schema that qom-get
     * refuses as QEMU does ("Property 'TYPE.NAME' is not readable").
     */
    const char *const *write_only;
    /*
     * Optional, NULL-terminated: every property of the schema, in the
     * order qom-list and qom-list-properties show them, where QEMU's
     * (observed: the order of its hash table of properties) is not the
     * schema's.  The schema keeps QEMU's declaration order, which decides
     * which of two bad values object-add reports.
     */
    const char *const *qom_list_order;
} UserObjectType;

/* Registers @type; the schema must have a variant of the same name. */
void user_object_register_type(const UserObjectType *type);

/*
 * Takes the registered type @name out again, for a program that has no
 * use for it, as QEMU's tools are built without some types (qemu-img and
 * qemu-io have no iothread): --object help does not list it, and
 * creating one fails with QEMU's "invalid object type: NAME".
 */
void user_object_withhold_type(const char *name);

#define user_object_type_init(type)                                      \
    static void __attribute__((constructor)) user_object_init_##type(void) \
    {                                                                    \
        user_object_register_type(&(type));                              \
    }

/*
 * --object OPTARG: "TYPE,id=ID,prop=value,...".  "help" lists the types
 * and "TYPE,help" (help anywhere among the options) a type's properties,
 * on stdout, and then exit(0), as QEMU's tools do.  Returns false with
 * @errp set if the object could not be created.
 */
bool user_object_add_cmdline(const char *optarg, Error **errp);

/* QMP object-add: @args is an ObjectOptions checked by the schema. */
bool user_object_add(JsonObject *args, Error **errp);

/* QMP object-del: refused while in use (invariant 2). */
bool user_object_del(const char *id, Error **errp);

/*
 * QMP qom-set: the object at @path ("/objects/ID", or its id alone, as
 * QEMU resolves a partial path) gets @value for its property @name, by
 * its type's set_property.
 */
bool user_object_set_property(const char *path, const char *name,
                              JsonNode *value, Error **errp);

/*
 * QMP qom-get: the property @name ("type", or one the type's
 * get_property shows) of the object at @path, as qom-set finds it.
 * NULL with QEMU's messages if there is no such object or property.
 */
JsonNode *user_object_get_property(const char *path, const char *name,
                                   Error **errp);

/*
 * QMP qom-list of "/objects" (the objects, as child<TYPE>) or of one
 * object (its properties, in the type's qom_list_order or the schema's),
 * each with "type" first, as QEMU lists them.
 */
JsonNode *user_object_list_properties(const char *path, Error **errp);
/*
 * qom-list-types: the types (ObjectTypeInfo list) that are or derive from
 * @implements (NULL: all), each with QEMU's parent type; with @abstract,
 * those parents too.
 */
JsonNode *user_object_list_types(const char *implements, bool abstract);
/*
 * qom-list-properties: the properties of objects of @type_name ("type"
 * first), or NULL with QEMU's DeviceNotFound "Class 'x' not found".
 */
JsonNode *user_object_type_properties(const char *type_name, Error **errp);

/*
 * For a type's set_property: whether @name is a property of @type_name's
 * schema ("Property 'TYPE.NAME' not found" if not, as QEMU) and @value
 * fits it, with the messages object-add gives.
 */
bool user_object_check_property(const char *type_name, const char *name,
                                JsonNode *value, Error **errp);

/* Deletes every object, in the reverse order of creation (at exit). */
void user_object_del_all(void);

/*
 * The object @id if it exists and is of type @type_name, else NULL.  The
 * pointer is borrowed: a user that keeps it beyond the current command
 * takes a reference.
 */
UserObject *user_object_find(const char *id, const char *type_name);
/*
 * The state of the object @id of type @type_name (what the type's
 * create returned), or NULL if there is none: the lookup of a user that
 * names an object in an option, and words its own error.
 */
void *user_object_find_state(const char *id, const char *type_name);

void user_object_ref(UserObject *obj);
void user_object_unref(UserObject *obj);

const char *user_object_get_id(const UserObject *obj);
/* The state that the type's create returned. */
void *user_object_get_state(const UserObject *obj);

#endif
