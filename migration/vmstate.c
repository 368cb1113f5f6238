/*
 * Device state save and load (see include/migration/vmstate.h for the
 * model and the wire format).
 *
 * Invariants:
 *  1. A save writes every field of the description's current version, in
 *     description order, each with its name, type and element count.
 *  2. A load consumes exactly one section and accepts it only if every
 *     field it holds is known, of the right type and size, present once,
 *     and every field the stream's version must have is there; bytes are
 *     never read past the end of the buffer.
 *  3. Recursion follows the descriptions (VMS_STRUCT), never the stream,
 *     so a hostile stream cannot nest deeper than the device's own state.
 */

#include "migration/vmstate.h"

#define VMSTATE_MAGIC          "QBVM"
#define VMSTATE_FORMAT_VERSION 1
#define VMSTATE_SECTION_START  'S'
#define VMSTATE_SECTION_END    'E'

static const char *const vmstate_type_names[VMS__MAX] = {
    [VMS_BOOL]   = "bool",
    [VMS_UINT8]  = "uint8",
    [VMS_UINT16] = "uint16",
    [VMS_UINT32] = "uint32",
    [VMS_UINT64] = "uint64",
    [VMS_INT64]  = "int64",
    [VMS_BUFFER] = "buffer",
    [VMS_STRUCT] = "struct",
};

static const char *vmstate_type_name(unsigned type)
{
    return type > 0 && type < VMS__MAX ? vmstate_type_names[type]
                                       : "unknown";
}

/* Bytes of one element of a scalar type. */
static size_t vmstate_scalar_size(VMStateType type)
{
    switch (type) {
    case VMS_BOOL:
    case VMS_UINT8:
    case VMS_BUFFER:
        return 1;
    case VMS_UINT16:
        return 2;
    case VMS_UINT32:
        return 4;
    case VMS_UINT64:
    case VMS_INT64:
        return 8;
    default:
        g_assert_not_reached();
    }
}

/* ---- the buffer ---- */

void vmstate_buffer_init(VMStateBuffer *b)
{
    b->data = g_byte_array_new();
    b->pos = 0;
}

void vmstate_buffer_init_data(VMStateBuffer *b, const void *data, size_t len)
{
    vmstate_buffer_init(b);
    g_byte_array_append(b->data, data, len);
}

void vmstate_buffer_destroy(VMStateBuffer *b)
{
    if (b->data) {
        g_byte_array_unref(b->data);
    }
    b->data = NULL;
    b->pos = 0;
}

static void vmstate_put(VMStateBuffer *b, const void *buf, size_t len)
{
    g_byte_array_append(b->data, buf, len);
}

static void vmstate_put_uint(VMStateBuffer *b, uint64_t val, size_t size)
{
    uint8_t buf[8];

    for (size_t i = 0; i < size; i++) {
        buf[i] = val >> (8 * (size - 1 - i));
    }
    vmstate_put(b, buf, size);
}

static void vmstate_put_name(VMStateBuffer *b, const char *name)
{
    size_t len = strlen(name);

    assert(len > 0 && len <= VMSTATE_NAME_MAX);
    vmstate_put_uint(b, len, 1);
    vmstate_put(b, name, len);
}

static int vmstate_get(VMStateBuffer *b, void *buf, size_t len,
                       const char *what, Error **errp)
{
    if (b->data->len - b->pos < len) {
        error_setg(errp, "Device state ends in the middle of %s (offset %zu)",
                   what, b->pos);
        return -EINVAL;
    }
    memcpy(buf, b->data->data + b->pos, len);
    b->pos += len;
    return 0;
}

static int vmstate_get_uint(VMStateBuffer *b, uint64_t *val, size_t size,
                            const char *what, Error **errp)
{
    uint8_t buf[8];
    int ret = vmstate_get(b, buf, size, what, errp);

    *val = 0;
    for (size_t i = 0; ret == 0 && i < size; i++) {
        *val = (*val << 8) | buf[i];
    }
    return ret;
}

static int vmstate_get_u32(VMStateBuffer *b, uint32_t *val, const char *what,
                           Error **errp)
{
    uint64_t v;
    int ret = vmstate_get_uint(b, &v, 4, what, errp);

    *val = v;
    return ret;
}

/* Reads a name into @name (VMSTATE_NAME_MAX + 1 bytes). */
static int vmstate_get_name(VMStateBuffer *b, char *name, const char *what,
                            Error **errp)
{
    uint64_t len;
    int ret = vmstate_get_uint(b, &len, 1, what, errp);

    if (ret == 0 && len == 0) {
        error_setg(errp, "Device state has an empty %s (offset %zu)", what,
                   b->pos - 1);
        return -EINVAL;
    }
    if (ret == 0) {
        ret = vmstate_get(b, name, len, what, errp);
    }
    name[ret == 0 ? len : 0] = '\0';
    return ret;
}

void vmstate_save_header(VMStateBuffer *b)
{
    vmstate_put(b, VMSTATE_MAGIC, 4);
    vmstate_put_uint(b, VMSTATE_FORMAT_VERSION, 4);
}

int vmstate_load_header(VMStateBuffer *b, Error **errp)
{
    char magic[4];
    uint32_t version;

    if (vmstate_get(b, magic, 4, "the header", errp) < 0) {
        return -EINVAL;
    }
    if (memcmp(magic, VMSTATE_MAGIC, 4)) {
        error_setg(errp, "Not a device state stream (no '%s' magic)",
                   VMSTATE_MAGIC);
        return -EINVAL;
    }
    if (vmstate_get_u32(b, &version, "the header", errp) < 0) {
        return -EINVAL;
    }
    if (version != VMSTATE_FORMAT_VERSION) {
        error_setg(errp, "Device state format version %" PRIu32
                   " is not supported (only %d)", version,
                   VMSTATE_FORMAT_VERSION);
        return -ENOTSUP;
    }
    return 0;
}

/* ---- save ---- */

static int vmstate_save_struct(VMStateBuffer *b,
                               const VMStateDescription *vmsd, void *opaque,
                               Error **errp);

static int vmstate_save_field(VMStateBuffer *b, const VMStateField *f,
                              void *opaque, Error **errp)
{
    uint8_t *base = (uint8_t *)opaque + f->offset;

    vmstate_put_name(b, f->name);
    vmstate_put_uint(b, f->type, 1);
    vmstate_put_uint(b, f->count, 4);
    switch (f->type) {
    case VMS_STRUCT:
        for (uint32_t i = 0; i < f->count; i++) {
            int ret = vmstate_save_struct(b, f->vmsd,
                                          base + i * f->vmsd->size, errp);
            if (ret < 0) {
                return ret;
            }
        }
        return 0;
    case VMS_BUFFER:
        vmstate_put(b, base, f->count);
        return 0;
    case VMS_BOOL:
        for (uint32_t i = 0; i < f->count; i++) {
            vmstate_put_uint(b, ((bool *)base)[i], 1);
        }
        return 0;
    default: {
        size_t size = vmstate_scalar_size(f->type);

        for (uint32_t i = 0; i < f->count; i++) {
            uint64_t v = 0;

            /* the host's representation of the member, widened */
            switch (size) {
            case 1: v = base[i]; break;
            case 2: v = ((uint16_t *)base)[i]; break;
            case 4: v = ((uint32_t *)base)[i]; break;
            case 8: v = ((uint64_t *)base)[i]; break;
            }
            vmstate_put_uint(b, v, size);
        }
        return 0;
    }
    }
}

static int vmstate_save_struct(VMStateBuffer *b,
                               const VMStateDescription *vmsd, void *opaque,
                               Error **errp)
{
    uint32_t count = 0;
    const VMStateField *f;
    int ret;

    if (vmsd->pre_save) {
        ret = vmsd->pre_save(opaque, errp);
        if (ret < 0) {
            return ret;
        }
    }
    for (f = vmsd->fields; f->name; f++) {
        count++;
    }
    vmstate_put_uint(b, vmsd->version_id, 4);
    vmstate_put_uint(b, count, 4);
    for (f = vmsd->fields; f->name; f++) {
        ret = vmstate_save_field(b, f, opaque, errp);
        if (ret < 0) {
            return ret;
        }
    }
    return 0;
}

int vmstate_save(VMStateBuffer *b, const VMStateDescription *vmsd,
                 uint32_t instance_id, void *opaque, Error **errp)
{
    size_t start = b->data->len;
    int ret;

    vmstate_put_uint(b, VMSTATE_SECTION_START, 1);
    vmstate_put_name(b, vmsd->name);
    vmstate_put_uint(b, instance_id, 4);
    ret = vmstate_save_struct(b, vmsd, opaque, errp);
    if (ret < 0) {
        /* a refused save leaves no half section behind */
        g_byte_array_set_size(b->data, start);
        return ret;
    }
    vmstate_put_uint(b, VMSTATE_SECTION_END, 1);
    return 0;
}

/* ---- load ---- */

static int vmstate_load_struct(VMStateBuffer *b,
                               const VMStateDescription *vmsd, void *opaque,
                               Error **errp);

static int vmstate_load_values(VMStateBuffer *b, const VMStateField *f,
                               const VMStateDescription *owner, void *opaque,
                               Error **errp)
{
    uint8_t *base = (uint8_t *)opaque + f->offset;
    size_t size;

    if (f->type == VMS_STRUCT) {
        for (uint32_t i = 0; i < f->count; i++) {
            int ret = vmstate_load_struct(b, f->vmsd,
                                          base + i * f->vmsd->size, errp);
            if (ret < 0) {
                return ret;
            }
        }
        return 0;
    }
    if (f->type == VMS_BUFFER) {
        return vmstate_get(b, base, f->count, f->name, errp);
    }
    size = vmstate_scalar_size(f->type);
    for (uint32_t i = 0; i < f->count; i++) {
        uint64_t v;
        int ret = vmstate_get_uint(b, &v, size, f->name, errp);

        if (ret < 0) {
            return ret;
        }
        switch (f->type) {
        case VMS_BOOL:
            if (v > 1) {
                error_setg(errp, "Field '%s' of '%s' is a bool but holds %"
                           PRIu64, f->name, owner->name, v);
                return -EINVAL;
            }
            ((bool *)base)[i] = v;
            break;
        case VMS_UINT8:  base[i] = v; break;
        case VMS_UINT16: ((uint16_t *)base)[i] = v; break;
        case VMS_UINT32: ((uint32_t *)base)[i] = v; break;
        case VMS_UINT64: ((uint64_t *)base)[i] = v; break;
        case VMS_INT64:  ((int64_t *)base)[i] = (int64_t)v; break;
        default: g_assert_not_reached();
        }
    }
    return 0;
}

static int vmstate_find_field(const VMStateDescription *vmsd,
                              const char *name)
{
    for (int i = 0; vmsd->fields[i].name; i++) {
        if (!strcmp(vmsd->fields[i].name, name)) {
            return i;
        }
    }
    return -1;
}

/* Invariant 2: one field of a struct of stream version @version. */
static int vmstate_load_field(VMStateBuffer *b,
                              const VMStateDescription *vmsd, int version,
                              bool *seen, void *opaque, Error **errp)
{
    char name[VMSTATE_NAME_MAX + 1];
    const VMStateField *f;
    uint64_t type;
    uint32_t count;
    int idx;

    if (vmstate_get_name(b, name, "a field name", errp) < 0 ||
        vmstate_get_uint(b, &type, 1, name, errp) < 0 ||
        vmstate_get_u32(b, &count, name, errp) < 0) {
        return -EINVAL;
    }
    idx = vmstate_find_field(vmsd, name);
    if (idx < 0) {
        error_setg(errp, "Unknown field '%s' in device state '%s'", name,
                   vmsd->name);
        return -EINVAL;
    }
    f = &vmsd->fields[idx];
    if (seen[idx]) {
        error_setg(errp, "Field '%s' appears twice in device state '%s'",
                   name, vmsd->name);
        return -EINVAL;
    }
    seen[idx] = true;
    if (f->version_id > version) {
        error_setg(errp, "Field '%s' of device state '%s' is new in version"
                   " %d but the stream is version %d", name, vmsd->name,
                   f->version_id, version);
        return -EINVAL;
    }
    if (type != f->type || count != f->count) {
        error_setg(errp, "Field '%s' of device state '%s' is %s[%" PRIu32
                   "] in the stream, %s[%" PRIu32 "] in this device", name,
                   vmsd->name, vmstate_type_name(type), count,
                   vmstate_type_name(f->type), f->count);
        return -EINVAL;
    }
    return vmstate_load_values(b, f, vmsd, opaque, errp);
}

static int vmstate_load_struct(VMStateBuffer *b,
                               const VMStateDescription *vmsd, void *opaque,
                               Error **errp)
{
    g_autofree bool *seen = NULL;
    uint32_t version, count, nfields = 0;
    int ret;

    if (vmstate_get_u32(b, &version, vmsd->name, errp) < 0 ||
        vmstate_get_u32(b, &count, vmsd->name, errp) < 0) {
        return -EINVAL;
    }
    if (version < (uint32_t)vmsd->minimum_version_id ||
        version > (uint32_t)vmsd->version_id) {
        error_setg(errp, "Device state '%s' version %" PRIu32 " is not "
                   "supported (versions %d to %d are)", vmsd->name, version,
                   vmsd->minimum_version_id, vmsd->version_id);
        return -ENOTSUP;
    }
    while (vmsd->fields[nfields].name) {
        nfields++;
    }
    if (count > nfields) {
        error_setg(errp, "Device state '%s' has %" PRIu32 " fields, more "
                   "than the %" PRIu32 " it can have", vmsd->name, count,
                   nfields);
        return -EINVAL;
    }
    seen = g_new0(bool, nfields + 1);
    for (uint32_t i = 0; i < count; i++) {
        ret = vmstate_load_field(b, vmsd, version, seen, opaque, errp);
        if (ret < 0) {
            return ret;
        }
    }
    for (uint32_t i = 0; i < nfields; i++) {
        if (!seen[i] && vmsd->fields[i].version_id <= (int)version) {
            error_setg(errp, "Field '%s' is missing from device state '%s'"
                       " version %" PRIu32, vmsd->fields[i].name, vmsd->name,
                       version);
            return -EINVAL;
        }
    }
    if (vmsd->post_load) {
        return vmsd->post_load(opaque, version, errp);
    }
    return 0;
}

int vmstate_load(VMStateBuffer *b, const VMStateDescription *vmsd,
                 uint32_t instance_id, void *opaque, Error **errp)
{
    char name[VMSTATE_NAME_MAX + 1];
    uint64_t tag;
    uint32_t id;
    int ret;

    if (vmstate_get_uint(b, &tag, 1, "a section", errp) < 0) {
        return -EINVAL;
    }
    if (tag != VMSTATE_SECTION_START) {
        error_setg(errp, "Device state section expected at offset %zu",
                   b->pos - 1);
        return -EINVAL;
    }
    if (vmstate_get_name(b, name, "a section name", errp) < 0 ||
        vmstate_get_u32(b, &id, name, errp) < 0) {
        return -EINVAL;
    }
    if (strcmp(name, vmsd->name) || id != instance_id) {
        error_setg(errp, "Device state section '%s' instance %" PRIu32
                   " found where '%s' instance %" PRIu32 " was expected",
                   name, id, vmsd->name, instance_id);
        return -EINVAL;
    }
    ret = vmstate_load_struct(b, vmsd, opaque, errp);
    if (ret < 0) {
        return ret;
    }
    if (vmstate_get_uint(b, &tag, 1, "a section end", errp) < 0) {
        return -EINVAL;
    }
    if (tag != VMSTATE_SECTION_END) {
        error_setg(errp, "Device state section '%s' does not end where its "
                   "fields do (offset %zu)", name, b->pos - 1);
        return -EINVAL;
    }
    return 0;
}

int vmstate_peek_section(VMStateBuffer *b, char *name, uint32_t *instance_id,
                         Error **errp)
{
    size_t start = b->pos;
    uint64_t tag;
    int ret;

    if (vmstate_get_uint(b, &tag, 1, "a section", errp) < 0) {
        return -EINVAL;
    }
    if (tag != VMSTATE_SECTION_START) {
        error_setg(errp, "Device state section expected at offset %zu",
                   start);
        b->pos = start;
        return -EINVAL;
    }
    ret = vmstate_get_name(b, name, "a section name", errp);
    if (ret == 0) {
        ret = vmstate_get_u32(b, instance_id, name, errp);
    }
    b->pos = start;
    return ret;
}

/* ---- sizes ---- */

static uint64_t vmstate_struct_size(const VMStateDescription *vmsd);

static uint64_t vmstate_field_size(const VMStateField *f)
{
    /* name, type, element count */
    uint64_t size = 1 + strlen(f->name) + 1 + 4;

    if (f->type == VMS_STRUCT) {
        return size + f->count * vmstate_struct_size(f->vmsd);
    }
    return size + (uint64_t)f->count * vmstate_scalar_size(f->type);
}

/* Version and field count, then the fields of the current version. */
static uint64_t vmstate_struct_size(const VMStateDescription *vmsd)
{
    uint64_t size = 4 + 4;

    for (const VMStateField *f = vmsd->fields; f->name; f++) {
        size += vmstate_field_size(f);
    }
    return size;
}

uint64_t vmstate_section_size(const VMStateDescription *vmsd)
{
    /* tag, name, instance id, the struct, end tag */
    return 1 + 1 + strlen(vmsd->name) + 4 + vmstate_struct_size(vmsd) + 1;
}
