/*
 * Cutting a byte stream into JSON messages (see include/util/json.h).
 *
 * The scanner knows only as much JSON as framing needs: strings (where
 * brackets do not count), brackets and top-level scalars.  Whether a
 * message is valid is the parser's business, once it is complete.
 *
 * Invariants:
 *  1. s->cur holds the bytes of the message being scanned, unless it
 *     broke a limit (s->overflow), in which case it holds nothing and the
 *     scan only follows the brackets to the message's end.  A raw control
 *     character inside a string ends the message at once, as an error.
 *  2. s->depth counts the brackets open in the current message; a message
 *     ends when it drops back to 0, or at the end of a top-level scalar.
 *     It never exceeds JSON_STREAM_MAX_DEPTH: a message that would go
 *     deeper is not followed further but ends there, as an error, so
 *     the counter is bounded whatever a client sends.
 *  3. Every queued item is a complete message (JsonStreamItem).
 */
#include "util/json.h"

typedef enum JsonStreamOverflow {
    JSON_STREAM_OK,
    JSON_STREAM_TOO_LONG,
    JSON_STREAM_TOO_DEEP,
    /* a raw control character in a string: the string was never closed */
    JSON_STREAM_BAD_STRING,
} JsonStreamOverflow;

typedef struct JsonStreamItem {
    GString *text;              /* NULL when the message broke a limit */
    JsonStreamOverflow overflow;
    unsigned char bad_char;     /* for JSON_STREAM_BAD_STRING */
} JsonStreamItem;

struct JsonStreamer {
    size_t max_len;
    GString *cur;
    unsigned int depth;         /* invariant 2 */
    char quote;                 /* in a string quoted by this, or 0 */
    bool escape;                /* the last byte in a string was '\' */
    bool in_scalar;             /* in a top-level number or keyword */
    JsonStreamOverflow overflow;
    GQueue items;
};

JsonStreamer *json_streamer_new(size_t max_len)
{
    JsonStreamer *s = g_new0(JsonStreamer, 1);

    s->max_len = max_len;
    s->cur = g_string_new(NULL);
    g_queue_init(&s->items);
    return s;
}

static void json_stream_item_free(JsonStreamItem *item)
{
    if (item->text) {
        g_string_free(item->text, TRUE);
    }
    g_free(item);
}

void json_streamer_free(JsonStreamer *s)
{
    if (!s) {
        return;
    }
    g_queue_clear_full(&s->items, (GDestroyNotify)json_stream_item_free);
    g_string_free(s->cur, TRUE);
    g_free(s);
}

static void json_streamer_reset(JsonStreamer *s)
{
    g_string_truncate(s->cur, 0);
    s->depth = 0;
    s->quote = 0;
    s->escape = false;
    s->in_scalar = false;
    s->overflow = JSON_STREAM_OK;
}

static void json_streamer_emit(JsonStreamer *s)
{
    JsonStreamItem *item = g_new0(JsonStreamItem, 1);

    item->overflow = s->overflow;
    if (s->overflow == JSON_STREAM_OK) {
        item->text = g_string_new_len(s->cur->str, s->cur->len);
    }
    g_queue_push_tail(&s->items, item);
    json_streamer_reset(s);
}

/*
 * How deep a message that is too deep (past JSON_MAX_NESTING) is still
 * followed to find its end, so that it costs one error reply rather than
 * one per closing bracket.  A million brackets are a megabyte of input
 * no client sends by mistake; past it the message ends at once (one
 * error per million brackets at worst), and what follows is scanned as
 * new messages.
 */
#define JSON_STREAM_MAX_DEPTH (1024 * JSON_MAX_NESTING)

/* Keeps @c in the current message unless the message broke a limit. */
static void json_streamer_keep(JsonStreamer *s, char c)
{
    if (s->overflow != JSON_STREAM_OK) {
        return;
    }
    if (s->cur->len >= s->max_len) {
        s->overflow = JSON_STREAM_TOO_LONG;
        g_string_truncate(s->cur, 0);
        return;
    }
    g_string_append_c(s->cur, c);
}

static bool json_streamer_is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static void json_streamer_byte(JsonStreamer *s, char c)
{
    if (s->quote && (unsigned char)c < 0x20) {
        /*
         * JSON strings cannot hold raw control characters, so the quote
         * was never closed: end the message here, and a client that sent
         * an unterminated string is back in step at the next line.
         */
        JsonStreamItem *item = g_new0(JsonStreamItem, 1);

        item->overflow = JSON_STREAM_BAD_STRING;
        item->bad_char = c;
        g_queue_push_tail(&s->items, item);
        json_streamer_reset(s);
        return;
    }
    if (s->quote) {
        json_streamer_keep(s, c);
        if (s->escape) {
            s->escape = false;
        } else if (c == '\\') {
            s->escape = true;
        } else if (c == s->quote) {
            s->quote = 0;
            if (!s->depth) {
                json_streamer_emit(s);
            }
        }
        return;
    }
    if (s->in_scalar) {
        if (!json_streamer_is_ws(c) && !strchr("{}[]\"',:", c)) {
            json_streamer_keep(s, c);
            return;
        }
        /* the delimiter ends the scalar and is scanned on its own */
        json_streamer_emit(s);
    }
    if (!s->depth && json_streamer_is_ws(c)) {
        return;
    }
    json_streamer_keep(s, c);
    switch (c) {
    case '"':
    case '\'':
        s->quote = c;
        return;
    case '{':
    case '[':
        if (s->depth == JSON_STREAM_MAX_DEPTH) {
            /* invariant 2: too deep to follow, end it here */
            json_streamer_emit(s);
            return;
        }
        if (++s->depth > JSON_MAX_NESTING && s->overflow == JSON_STREAM_OK) {
            s->overflow = JSON_STREAM_TOO_DEEP;
            g_string_truncate(s->cur, 0);
        }
        return;
    case '}':
    case ']':
        /* a stray closer at the top is a message the parser refuses */
        if (s->depth) {
            s->depth--;
        }
        if (!s->depth) {
            json_streamer_emit(s);
        }
        return;
    }
    if (!s->depth) {
        s->in_scalar = true;
    }
}

void json_streamer_feed(JsonStreamer *s, const char *buf, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if ((unsigned char)buf[i] == 0xff) {
            json_streamer_reset(s);
            continue;
        }
        json_streamer_byte(s, buf[i]);
    }
}

bool json_streamer_next(JsonStreamer *s, JsonNode **node, Error **errp)
{
    JsonStreamItem *item = g_queue_pop_head(&s->items);

    *node = NULL;
    if (!item) {
        return false;
    }
    switch (item->overflow) {
    case JSON_STREAM_OK:
        *node = json_parse_text(item->text->str, item->text->len, errp);
        break;
    case JSON_STREAM_TOO_LONG:
        error_setg(errp, "JSON message longer than %zu bytes", s->max_len);
        break;
    case JSON_STREAM_TOO_DEEP:
        error_setg(errp, "JSON nesting depth limit exceeded");
        break;
    case JSON_STREAM_BAD_STRING:
        error_setg(errp, "JSON parse error, control character 0x%02x in "
                   "string", item->bad_char);
        break;
    }
    json_stream_item_free(item);
    return true;
}
