/*
 * The public view of an export (include/qblock/block-export.h): read-only
 * accessors over BlockExport, so that its users need not reach into the
 * export layer's struct or its driver table.
 */
#include "qblock/block-export.h"

#include "block/export.h"

const char *blk_exp_get_id(BlockExport *exp)
{
    return exp->id;
}

const char *blk_exp_get_type(BlockExport *exp)
{
    return exp->drv->type;
}

BlockBackend *blk_exp_get_blk(BlockExport *exp)
{
    return exp->blk;
}
