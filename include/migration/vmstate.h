/*
 * Device state: a versioned, self-describing save and load of a device's
 * fields.
 *
 * A device describes its state once, as a VMStateDescription: a name, a
 * version, and the fields (name, type, offset in the device's struct, the
 * version that added it).  vmstate_save() writes a section that carries
 * every field's name, type and element count next to its value;
 * vmstate_load() reads a section back into a device of the same kind,
 * matching fields by name and checking their type and size, so that a
 * stream from another version of the device either loads correctly or is
 * refused with a message naming the field, never misread.
 *
 * Versions: a field with version_id N exists from version N of the
 * section on.  A stream of version V (minimum_version_id <= V <=
 * version_id) must hold exactly the fields of version <= V; fields added
 * later keep the value the device had before the load.
 *
 * Loaded values come from outside (a migration stream, an image's VM state
 * area): the description's post_load must check every value the device
 * relies on (indexes, lengths, states) and refuse inconsistent ones.  If a
 * load fails, the device's state is undefined: reset or discard it.
 *
 * The stream is a byte buffer (VMStateBuffer): a header, then one section
 * per device (and per page of guest RAM), each named by its description
 * and an instance id.  migration/savevm.c (include/migration/savevm.h)
 * stores it in a qcow2 internal snapshot's VM state area on savevm and
 * loads it back on loadvm, finding each section's device by its name and
 * instance id; the devices' tests also move it through memory.
 *
 * Wire format, big-endian:
 *   header:  "QBVM" u32 format version
 *   section: u8 'S', name, u32 instance id, u32 version, fields, u8 'E'
 *   fields:  u32 count, then per field: name, u8 type, u32 elements,
 *            the values (ints big-endian; BUFFER raw bytes; STRUCT: per
 *            element a u32 version and its fields)
 *   name:    u8 length (1-255), bytes
 */
#ifndef MIGRATION_VMSTATE_H
#define MIGRATION_VMSTATE_H

#include "util/osdep.h"
#include "util/error.h"

/* Section and field names are length-prefixed with one byte. */
#define VMSTATE_NAME_MAX    255
/* The stream header: magic and format version. */
#define VMSTATE_HEADER_SIZE 8

typedef enum VMStateType {
    VMS_BOOL = 1,
    VMS_UINT8,
    VMS_UINT16,
    VMS_UINT32,
    VMS_UINT64,
    VMS_INT64,
    VMS_BUFFER,     /* raw bytes; count is the byte length */
    VMS_STRUCT,     /* nested description; count elements of vmsd->size */
    VMS__MAX,
} VMStateType;

typedef struct VMStateDescription VMStateDescription;

typedef struct VMStateField {
    const char *name;
    size_t offset;
    VMStateType type;
    /* elements of an array (1 for a scalar), bytes of a BUFFER */
    uint32_t count;
    const VMStateDescription *vmsd;     /* VMS_STRUCT only */
    /* first version of the section that has this field */
    int version_id;
} VMStateField;

struct VMStateDescription {
    const char *name;
    int version_id;
    int minimum_version_id;
    /* size of the described struct: the stride of a STRUCT array */
    size_t size;
    /*
     * Optional.  pre_save may refuse (a request still in flight: drain
     * first) or copy state kept elsewhere into fields; post_load checks
     * the loaded values and applies them to what lives outside the
     * struct (the BlockBackend's write cache flag).  Both return 0 or
     * -errno with @errp set.
     */
    int (*pre_save)(void *opaque, Error **errp);
    int (*post_load)(void *opaque, int version_id, Error **errp);
    /* terminated by VMSTATE_END_OF_LIST() */
    const VMStateField *fields;
};

/* A stream in memory: written at the end, read from pos. */
typedef struct VMStateBuffer {
    GByteArray *data;
    size_t pos;
} VMStateBuffer;

/* An empty buffer to save into. */
void vmstate_buffer_init(VMStateBuffer *b);
/* A buffer holding a copy of @len bytes of @data, to load from. */
void vmstate_buffer_init_data(VMStateBuffer *b, const void *data,
                              size_t len);
void vmstate_buffer_destroy(VMStateBuffer *b);

void vmstate_save_header(VMStateBuffer *b);
int vmstate_load_header(VMStateBuffer *b, Error **errp);

/* Appends @opaque's state as section @vmsd->name, @instance_id. */
int vmstate_save(VMStateBuffer *b, const VMStateDescription *vmsd,
                 uint32_t instance_id, void *opaque, Error **errp);
/* Loads the next section, which must be @vmsd->name, @instance_id. */
int vmstate_load(VMStateBuffer *b, const VMStateDescription *vmsd,
                 uint32_t instance_id, void *opaque, Error **errp);

/*
 * Reads the name (into @name, VMSTATE_NAME_MAX + 1 bytes) and instance id
 * of the section that starts at the buffer's position, without consuming
 * it: the loader looks up the device it belongs to, then vmstate_load()s
 * it.  -EINVAL with @errp set if no section starts there.
 */
int vmstate_peek_section(VMStateBuffer *b, char *name, uint32_t *instance_id,
                         Error **errp);
/*
 * Bytes of the section vmstate_save() writes for a device of @vmsd: the
 * same for every device of the description (the wire format holds every
 * field at its full size), and an upper bound for a section of an older
 * version of it.
 */
uint64_t vmstate_section_size(const VMStateDescription *vmsd);

/*
 * Field macros.  Each checks at compile time that the struct member has
 * the C type the wire type stands for.
 */
#define VMSTATE_TYPE_CHECK(state, field, ctype)                         \
    (0 * sizeof(char[__builtin_types_compatible_p(                      \
        typeof(((state *)0)->field), ctype) ? 1 : -1]))

#define VMSTATE_SCALAR_V(field_, state, vtype, ctype, v) {              \
    .name = #field_,                                                    \
    .offset = offsetof(state, field_) +                                 \
              VMSTATE_TYPE_CHECK(state, field_, ctype),                 \
    .type = (vtype),                                                    \
    .count = 1,                                                         \
    .version_id = (v),                                                  \
}
#define VMSTATE_BOOL_V(f, s, v)   VMSTATE_SCALAR_V(f, s, VMS_BOOL, bool, v)
#define VMSTATE_UINT8_V(f, s, v)  VMSTATE_SCALAR_V(f, s, VMS_UINT8, uint8_t, v)
#define VMSTATE_UINT16_V(f, s, v) \
    VMSTATE_SCALAR_V(f, s, VMS_UINT16, uint16_t, v)
#define VMSTATE_UINT32_V(f, s, v) \
    VMSTATE_SCALAR_V(f, s, VMS_UINT32, uint32_t, v)
#define VMSTATE_UINT64_V(f, s, v) \
    VMSTATE_SCALAR_V(f, s, VMS_UINT64, uint64_t, v)
#define VMSTATE_INT64_V(f, s, v)  VMSTATE_SCALAR_V(f, s, VMS_INT64, int64_t, v)
#define VMSTATE_BOOL(f, s)   VMSTATE_BOOL_V(f, s, 1)
#define VMSTATE_UINT8(f, s)  VMSTATE_UINT8_V(f, s, 1)
#define VMSTATE_UINT16(f, s) VMSTATE_UINT16_V(f, s, 1)
#define VMSTATE_UINT32(f, s) VMSTATE_UINT32_V(f, s, 1)
#define VMSTATE_UINT64(f, s) VMSTATE_UINT64_V(f, s, 1)
#define VMSTATE_INT64(f, s)  VMSTATE_INT64_V(f, s, 1)

/* An array member of n elements of a scalar type. */
#define VMSTATE_ARRAY_V(field_, state, n, vtype, ctype, v) {            \
    .name = #field_,                                                    \
    .offset = offsetof(state, field_) +                                 \
              VMSTATE_TYPE_CHECK(state, field_, ctype[n]),              \
    .type = (vtype),                                                    \
    .count = (n),                                                       \
    .version_id = (v),                                                  \
}
#define VMSTATE_UINT16_ARRAY(f, s, n) \
    VMSTATE_ARRAY_V(f, s, n, VMS_UINT16, uint16_t, 1)
#define VMSTATE_UINT32_ARRAY(f, s, n) \
    VMSTATE_ARRAY_V(f, s, n, VMS_UINT32, uint32_t, 1)
#define VMSTATE_UINT64_ARRAY(f, s, n) \
    VMSTATE_ARRAY_V(f, s, n, VMS_UINT64, uint64_t, 1)

/* A uint8_t array member, saved as raw bytes. */
#define VMSTATE_BUFFER_V(field_, state, v) {                            \
    .name = #field_,                                                    \
    .offset = offsetof(state, field_) +                                 \
              VMSTATE_TYPE_CHECK(state, field_,                         \
                  uint8_t[sizeof(((state *)0)->field_)]),               \
    .type = VMS_BUFFER,                                                 \
    .count = sizeof(((state *)0)->field_),                              \
    .version_id = (v),                                                  \
}
#define VMSTATE_BUFFER(f, s) VMSTATE_BUFFER_V(f, s, 1)

/* A member (or array of n members) of struct type @stype, per @desc. */
#define VMSTATE_STRUCT_ARRAY_V(field_, state, n, desc, stype, v) {      \
    .name = #field_,                                                    \
    .offset = offsetof(state, field_) +                                 \
              VMSTATE_TYPE_CHECK(state, field_, stype[n]),              \
    .type = VMS_STRUCT,                                                 \
    .count = (n),                                                       \
    .vmsd = &(desc),                                                    \
    .version_id = (v),                                                  \
}
#define VMSTATE_STRUCT_ARRAY(f, s, n, desc, stype) \
    VMSTATE_STRUCT_ARRAY_V(f, s, n, desc, stype, 1)
#define VMSTATE_STRUCT_V(field_, state, desc, stype, v) {               \
    .name = #field_,                                                    \
    .offset = offsetof(state, field_) +                                 \
              VMSTATE_TYPE_CHECK(state, field_, stype),                 \
    .type = VMS_STRUCT,                                                 \
    .count = 1,                                                         \
    .vmsd = &(desc),                                                    \
    .version_id = (v),                                                  \
}
#define VMSTATE_STRUCT(f, s, desc, stype) VMSTATE_STRUCT_V(f, s, desc, stype, 1)

#define VMSTATE_END_OF_LIST() { .name = NULL }

#endif
