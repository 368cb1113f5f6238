/*
 * migration/vmstate.c: device state save and load through a buffer: every
 * type round-trips, versions add fields compatibly, and a stream that does
 * not fit the device (unknown, missing, retyped or repeated fields, other
 * versions, truncation at any byte, bad values) is refused with a message
 * naming what is wrong; the next section can be named without reading
 * it, and a description tells the size of its sections.
 */

#include "migration/vmstate.h"

typedef struct Inner {
    uint16_t a;
    bool b;
} Inner;

typedef struct Outer {
    bool flag;
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
    int64_t i64;
    uint32_t arr[3];
    uint8_t buf[5];
    Inner one;
    Inner many[2];
    uint32_t added_in_v2;
    int post_loads;
    bool refuse;
} Outer;

static int inner_post_load(void *opaque, int version_id, Error **errp)
{
    Inner *in = opaque;

    if (in->a == 0xdead) {
        error_setg(errp, "inner a is dead");
        return -EINVAL;
    }
    return 0;
}

static const VMStateDescription vmstate_inner = {
    .name = "inner",
    .version_id = 1,
    .minimum_version_id = 1,
    .size = sizeof(Inner),
    .post_load = inner_post_load,
    .fields = (const VMStateField[]) {
        VMSTATE_UINT16(a, Inner),
        VMSTATE_BOOL(b, Inner),
        VMSTATE_END_OF_LIST()
    },
};

static int outer_pre_save(void *opaque, Error **errp)
{
    Outer *o = opaque;

    if (o->refuse) {
        error_setg(errp, "refused");
        return -EBUSY;
    }
    return 0;
}

static int outer_post_load(void *opaque, int version_id, Error **errp)
{
    ((Outer *)opaque)->post_loads++;
    return 0;
}

#define OUTER_V1_FIELDS                                         \
        VMSTATE_BOOL(flag, Outer),                              \
        VMSTATE_UINT8(u8, Outer),                               \
        VMSTATE_UINT16(u16, Outer),                             \
        VMSTATE_UINT32(u32, Outer),                             \
        VMSTATE_UINT64(u64, Outer),                             \
        VMSTATE_INT64(i64, Outer),                              \
        VMSTATE_UINT32_ARRAY(arr, Outer, 3),                    \
        VMSTATE_BUFFER(buf, Outer),                             \
        VMSTATE_STRUCT(one, Outer, vmstate_inner, Inner),       \
        VMSTATE_STRUCT_ARRAY(many, Outer, 2, vmstate_inner, Inner)

static const VMStateDescription vmstate_outer_v1 = {
    .name = "outer",
    .version_id = 1,
    .minimum_version_id = 1,
    .size = sizeof(Outer),
    .pre_save = outer_pre_save,
    .post_load = outer_post_load,
    .fields = (const VMStateField[]) {
        OUTER_V1_FIELDS,
        VMSTATE_END_OF_LIST()
    },
};

static const VMStateDescription vmstate_outer_v2 = {
    .name = "outer",
    .version_id = 2,
    .minimum_version_id = 1,
    .size = sizeof(Outer),
    .pre_save = outer_pre_save,
    .post_load = outer_post_load,
    .fields = (const VMStateField[]) {
        OUTER_V1_FIELDS,
        VMSTATE_UINT32_V(added_in_v2, Outer, 2),
        VMSTATE_END_OF_LIST()
    },
};

/* Descriptions of the same "outer" section that disagree with v1. */
#define FIELD(n, member, t) { .name = (n), .offset = offsetof(Outer, member), \
                              .type = (t), .count = 1, .version_id = 1 }
#define OUTER_DESC(n, f) { .name = (n), .version_id = 1,                  \
                           .minimum_version_id = 1, .size = sizeof(Outer), \
                           .fields = (f) }

static const VMStateField fields_flag[] = {
    FIELD("flag", flag, VMS_BOOL),
    VMSTATE_END_OF_LIST()
};
static const VMStateField fields_u8_retyped[] = {
    FIELD("flag", flag, VMS_BOOL),
    FIELD("u8", u32, VMS_UINT32),
    VMSTATE_END_OF_LIST()
};
static const VMStateField fields_longer[] = {
    FIELD("flag", flag, VMS_BOOL),
    FIELD("u8", u32, VMS_UINT32),
    FIELD("u16", u16, VMS_UINT16),
    VMSTATE_END_OF_LIST()
};
static const VMStateField fields_ab[] = {
    FIELD("a", u8, VMS_UINT8),
    FIELD("b", u16, VMS_UINT16),
    VMSTATE_END_OF_LIST()
};
static const VMStateField fields_aa[] = {
    FIELD("a", u8, VMS_UINT8),
    FIELD("a", u16, VMS_UINT8),
    VMSTATE_END_OF_LIST()
};
static const VMStateField fields_ac[] = {
    FIELD("a", u8, VMS_UINT8),
    FIELD("c", u16, VMS_UINT16),
    VMSTATE_END_OF_LIST()
};
static const VMStateDescription missing = OUTER_DESC("outer", fields_flag);
static const VMStateDescription retyped =
    OUTER_DESC("outer", fields_u8_retyped);
static const VMStateDescription longer = OUTER_DESC("outer", fields_longer);
static const VMStateDescription ab = OUTER_DESC("outer", fields_ab);
static const VMStateDescription aa = OUTER_DESC("outer", fields_aa);
static const VMStateDescription ac = OUTER_DESC("outer", fields_ac);
static const VMStateDescription one_bool = OUTER_DESC("outer", fields_flag);
static const VMStateDescription other = OUTER_DESC("other", fields_flag);

static Outer sample(void)
{
    Outer o = {
        .flag = true, .u8 = 0xa1, .u16 = 0xb2c3, .u32 = 0xd4e5f607,
        .u64 = UINT64_C(0x1122334455667788), .i64 = -12345678901LL,
        .arr = { 1, 0x80000000, 3 }, .buf = { 9, 8, 7, 6, 5 },
        .one = { .a = 42, .b = true },
        .many = { { .a = 7, .b = false }, { .a = 0xffff, .b = true } },
        .added_in_v2 = 77,
    };
    return o;
}

static void save_to(VMStateBuffer *b, const VMStateDescription *vmsd,
                    Outer *o)
{
    vmstate_buffer_init(b);
    vmstate_save_header(b);
    g_assert_cmpint(vmstate_save(b, vmsd, 3, o, &error_abort), ==, 0);
}

/* Loads @b (from its start) into @o with @vmsd; returns the error text. */
static char *load_from(VMStateBuffer *b, const VMStateDescription *vmsd,
                       Outer *o)
{
    Error *err = NULL;
    char *msg = NULL;

    b->pos = 0;
    if (vmstate_load_header(b, &err) == 0) {
        vmstate_load(b, vmsd, 3, o, &err);
    }
    if (err) {
        msg = g_strdup(error_get_pretty(err));
        error_free(err);
    }
    return msg;
}

static void assert_refused(VMStateBuffer *b, const VMStateDescription *vmsd,
                           const char *fragment)
{
    Outer o = { 0 };
    g_autofree char *msg = load_from(b, vmsd, &o);

    g_assert_nonnull(msg);
    if (!strstr(msg, fragment)) {
        g_error("expected '%s' in: %s", fragment, msg);
    }
}

static void test_round_trip(void)
{
    Outer o = sample(), back = { 0 };
    VMStateBuffer b;

    save_to(&b, &vmstate_outer_v2, &o);
    g_assert_null(load_from(&b, &vmstate_outer_v2, &back));
    g_assert_cmpuint(b.pos, ==, b.data->len);
    g_assert_cmpint(back.post_loads, ==, 1);
    g_assert_true(back.flag);
    g_assert_cmphex(back.u8, ==, o.u8);
    g_assert_cmphex(back.u16, ==, o.u16);
    g_assert_cmphex(back.u32, ==, o.u32);
    g_assert_cmphex(back.u64, ==, o.u64);
    g_assert_cmpint(back.i64, ==, o.i64);
    g_assert_cmpmem(back.arr, sizeof(back.arr), o.arr, sizeof(o.arr));
    g_assert_cmpmem(back.buf, sizeof(back.buf), o.buf, sizeof(o.buf));
    g_assert_cmpuint(back.one.a, ==, 42);
    g_assert_true(back.one.b);
    g_assert_cmpuint(back.many[0].a, ==, 7);
    g_assert_false(back.many[0].b);
    g_assert_cmpuint(back.many[1].a, ==, 0xffff);
    g_assert_true(back.many[1].b);
    g_assert_cmpuint(back.added_in_v2, ==, 77);
    vmstate_buffer_destroy(&b);
}

static void test_old_version_loads(void)
{
    Outer o = sample(), back = { .added_in_v2 = 5 };
    VMStateBuffer b;

    save_to(&b, &vmstate_outer_v1, &o);
    g_assert_null(load_from(&b, &vmstate_outer_v2, &back));
    /* the field the stream cannot have keeps its value */
    g_assert_cmpuint(back.added_in_v2, ==, 5);
    g_assert_cmpuint(back.u64, ==, o.u64);
    vmstate_buffer_destroy(&b);
}

static void test_new_version_refused(void)
{
    Outer o = sample();
    VMStateBuffer b;

    save_to(&b, &vmstate_outer_v2, &o);
    assert_refused(&b, &vmstate_outer_v1,
                   "Device state 'outer' version 2 is not supported");
    vmstate_buffer_destroy(&b);
}

static void test_field_mismatches(void)
{
    Outer o = sample();
    VMStateBuffer b;

    /* a stream field this device does not know */
    save_to(&b, &vmstate_outer_v1, &o);
    assert_refused(&b, &missing, "has 10 fields, more than the 1");
    vmstate_buffer_destroy(&b);
    save_to(&b, &retyped, &o);
    assert_refused(&b, &missing, "more than the 1");
    assert_refused(&b, &vmstate_outer_v1,
                   "Field 'u8' of device state 'outer' is uint32[1] in the "
                   "stream, uint8[1] in this device");
    vmstate_buffer_destroy(&b);
    /* a field the device needs that the stream lacks */
    save_to(&b, &missing, &o);
    assert_refused(&b, &longer, "Field 'u8' is missing from device state "
                   "'outer' version 1");
    vmstate_buffer_destroy(&b);
}

static void test_unknown_and_repeated_fields(void)
{
    Outer o = sample();
    VMStateBuffer b;

    save_to(&b, &aa, &o);
    assert_refused(&b, &ab, "Field 'a' appears twice in device state "
                   "'outer'");
    vmstate_buffer_destroy(&b);
    save_to(&b, &ab, &o);
    assert_refused(&b, &ac, "Unknown field 'b' in device state 'outer'");
    vmstate_buffer_destroy(&b);
}

/* Every prefix of a valid stream is refused, none crashes. */
static void test_truncated(void)
{
    Outer o = sample();
    VMStateBuffer b, cut;

    save_to(&b, &vmstate_outer_v2, &o);
    for (guint len = 0; len < b.data->len; len++) {
        vmstate_buffer_init_data(&cut, b.data->data, len);
        assert_refused(&cut, &vmstate_outer_v2, "");
        vmstate_buffer_destroy(&cut);
    }
    vmstate_buffer_destroy(&b);
}

/* Flipping any single byte either loads or is refused; it never crashes. */
static void test_corrupted_bytes(void)
{
    Outer o = sample();
    VMStateBuffer b;

    save_to(&b, &vmstate_outer_v2, &o);
    for (guint i = 0; i < b.data->len; i++) {
        for (int bit = 0; bit < 8; bit++) {
            Outer back = { 0 };
            char *msg;

            b.data->data[i] ^= 1 << bit;
            msg = load_from(&b, &vmstate_outer_v2, &back);
            g_free(msg);
            b.data->data[i] ^= 1 << bit;
        }
    }
    vmstate_buffer_destroy(&b);
}

static void test_bad_values(void)
{
    Outer o = sample();
    VMStateBuffer b;

    /* the bool's byte sits just before the section end */
    save_to(&b, &one_bool, &o);
    b.data->data[b.data->len - 2] = 2;
    assert_refused(&b, &one_bool, "Field 'flag' of 'outer' is a bool but "
                   "holds 2");
    vmstate_buffer_destroy(&b);
    /* a nested post_load's check stops the load */
    o.many[1].a = 0xdead;
    save_to(&b, &vmstate_outer_v1, &o);
    assert_refused(&b, &vmstate_outer_v1, "inner a is dead");
    vmstate_buffer_destroy(&b);
}

static void test_sections_and_header(void)
{
    Outer o = sample();
    Error *err = NULL;
    VMStateBuffer b;

    save_to(&b, &vmstate_outer_v1, &o);
    assert_refused(&b, &other, "Device state section 'outer' instance 3 "
                   "found where 'other' instance 3 was expected");
    b.data->data[0] = 'X';
    assert_refused(&b, &vmstate_outer_v1, "Not a device state stream");
    vmstate_buffer_destroy(&b);

    /* a refused save leaves nothing of its section behind */
    vmstate_buffer_init(&b);
    o.refuse = true;
    g_assert_cmpint(vmstate_save(&b, &vmstate_outer_v1, 0, &o, &err), ==,
                    -EBUSY);
    g_assert_cmpstr(error_get_pretty(err), ==, "refused");
    error_free(err);
    g_assert_cmpuint(b.data->len, ==, 0);
    vmstate_buffer_destroy(&b);
}

/* Peeking names the next section and consumes nothing. */
static void test_peek_section(void)
{
    char name[VMSTATE_NAME_MAX + 1];
    Outer o = sample(), back = { 0 };
    Error *err = NULL;
    uint32_t id;
    VMStateBuffer b;

    save_to(&b, &vmstate_outer_v1, &o);
    g_assert_cmpint(vmstate_save(&b, &vmstate_inner, 9, &o.one,
                                 &error_abort), ==, 0);
    b.pos = 0;
    g_assert_cmpint(vmstate_load_header(&b, &error_abort), ==, 0);
    g_assert_cmpint(vmstate_peek_section(&b, name, &id, &error_abort), ==, 0);
    g_assert_cmpstr(name, ==, "outer");
    g_assert_cmpuint(id, ==, 3);
    g_assert_cmpuint(b.pos, ==, VMSTATE_HEADER_SIZE);
    g_assert_cmpint(vmstate_load(&b, &vmstate_outer_v1, 3, &back,
                                 &error_abort), ==, 0);
    g_assert_cmpint(vmstate_peek_section(&b, name, &id, &error_abort), ==, 0);
    g_assert_cmpstr(name, ==, "inner");
    g_assert_cmpuint(id, ==, 9);
    /* not at a section: the header's bytes, or past the end */
    b.pos = 0;
    g_assert_cmpint(vmstate_peek_section(&b, name, &id, &err), ==, -EINVAL);
    g_assert_nonnull(strstr(error_get_pretty(err), "section expected at "
                            "offset 0"));
    error_free(err);
    err = NULL;
    g_assert_cmpuint(b.pos, ==, 0);
    b.pos = b.data->len;
    g_assert_cmpint(vmstate_peek_section(&b, name, &id, &err), ==, -EINVAL);
    error_free(err);
    vmstate_buffer_destroy(&b);
}

/* The size a description announces is the size a save writes. */
static void test_section_size(void)
{
    Outer o = sample();
    VMStateBuffer b;

    vmstate_buffer_init(&b);
    g_assert_cmpint(vmstate_save(&b, &vmstate_outer_v2, 0, &o,
                                 &error_abort), ==, 0);
    g_assert_cmpuint(b.data->len, ==, vmstate_section_size(&vmstate_outer_v2));
    g_byte_array_set_size(b.data, 0);
    g_assert_cmpint(vmstate_save(&b, &vmstate_outer_v1, 0, &o,
                                 &error_abort), ==, 0);
    g_assert_cmpuint(b.data->len, ==, vmstate_section_size(&vmstate_outer_v1));
    g_assert_cmpuint(vmstate_section_size(&vmstate_outer_v1), <,
                     vmstate_section_size(&vmstate_outer_v2));
    vmstate_buffer_destroy(&b);
    vmstate_buffer_init(&b);
    vmstate_save_header(&b);
    g_assert_cmpuint(b.data->len, ==, VMSTATE_HEADER_SIZE);
    vmstate_buffer_destroy(&b);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/vmstate/round-trip", test_round_trip);
    g_test_add_func("/vmstate/old-version-loads", test_old_version_loads);
    g_test_add_func("/vmstate/new-version-refused", test_new_version_refused);
    g_test_add_func("/vmstate/field-mismatches", test_field_mismatches);
    g_test_add_func("/vmstate/unknown-and-repeated-fields",
                    test_unknown_and_repeated_fields);
    g_test_add_func("/vmstate/truncated", test_truncated);
    g_test_add_func("/vmstate/corrupted-bytes", test_corrupted_bytes);
    g_test_add_func("/vmstate/bad-values", test_bad_values);
    g_test_add_func("/vmstate/sections-and-header", test_sections_and_header);
    g_test_add_func("/vmstate/peek-section", test_peek_section);
    g_test_add_func("/vmstate/section-size", test_section_size);
    return g_test_run();
}
