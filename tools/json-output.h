/*
 * JSON output as QEMU's tools print it, for qblock-img and qblock-io.
 */
#ifndef QBLOCK_JSON_OUTPUT_H
#define QBLOCK_JSON_OUTPUT_H

#include "block/block_int.h"

#include <json-glib/json-glib.h>

/*
 * JSON output as QEMU prints it: objects list their members in the
 * order of QEMU's QDict buckets (not insertion order), four-space
 * indentation, integers without quotes.  @node is any json-glib tree.
 */
void img_json_print(JsonNode *node);
/* The same into a GString, at indentation @level. */
void img_json_append(GString *out, JsonNode *node, int level);
/*
 * The human rendering QEMU derives from the same tree (qemu-img info's
 * "Format specific information"): one "key: value" line per member, keys
 * with '-' read as spaces, nested objects and "[i]:" list items indented
 * by four spaces per @level.
 */
void img_json_append_human(GString *out, JsonNode *node, int level);

/*
 * The "Format specific information" lines of @bs (qemu-img info,
 * qemu-io info), rendered from the driver's JSON data as QEMU does; NULL
 * if the driver has none.  The caller frees the string.
 */
char *img_format_specific_human(BlockDriverState *bs);

#endif
