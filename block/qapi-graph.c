/*
 * x-debug-query-block-graph: the whole graph as the monitor sees it, for
 * debugging (include/block/qapi.h).
 *
 * Its vertices are the BlockBackends (exports', jobs'; anonymous ones
 * named ""), the block jobs (named by their ids) and every node; its
 * edges are the backends' root edges, the jobs' edges on the nodes they
 * involve and the nodes' edges to their children, each with the
 * permissions its parent takes and shares.  The ids are QEMU's: numbered
 * from 1 in the order a vertex is first met, backends first, then jobs,
 * then nodes, and both lists come last-met first, as QEMU builds them.
 */
#include "block/qapi.h"

#include "block/block_int.h"
#include "job/blockjob.h"
#include "qblock/block-backend.h"

typedef struct GraphDump {
    GHashTable *ids;            /* vertex pointer -> id */
    GList *nodes;               /* JsonNode *, the last met first */
    GList *edges;               /* likewise */
} GraphDump;

static int64_t graph_id(GraphDump *g, const void *vertex)
{
    gpointer id = g_hash_table_lookup(g->ids, vertex);

    if (!id) {
        id = GSIZE_TO_POINTER(g_hash_table_size(g->ids) + 1);
        g_hash_table_insert(g->ids, (gpointer)vertex, id);
    }
    return GPOINTER_TO_SIZE(id);
}

static void graph_add_vertex(GraphDump *g, const void *vertex,
                             const char *type, const char *name)
{
    JsonObject *o = json_object_new();

    json_object_set_int_member(o, "id", graph_id(g, vertex));
    json_object_set_string_member(o, "type", type);
    json_object_set_string_member(o, "name", name);
    g->nodes = g_list_prepend(g->nodes,
                              json_node_init_object(json_node_alloc(), o));
    json_object_unref(o);
}

/* QEMU's BlockPermission names, the highest bit first as QEMU lists them */
static JsonArray *graph_perms(uint64_t perm)
{
    static const char *const names[] = {
        "consistent-read", "write", "write-unchanged", "resize",
    };
    JsonArray *a = json_array_new();

    for (int i = G_N_ELEMENTS(names) - 1; i >= 0; i--) {
        if (perm & (1ULL << i)) {
            json_array_add_string_element(a, names[i]);
        }
    }
    return a;
}

static void graph_add_edge(GraphDump *g, const void *parent,
                           BlockDriverState *child, const char *name,
                           uint64_t perm, uint64_t shared_perm)
{
    JsonObject *o = json_object_new();

    json_object_set_int_member(o, "parent", graph_id(g, parent));
    json_object_set_int_member(o, "child", graph_id(g, child));
    json_object_set_string_member(o, "name", name);
    json_object_set_array_member(o, "perm", graph_perms(perm));
    json_object_set_array_member(o, "shared-perm", graph_perms(shared_perm));
    g->edges = g_list_prepend(g->edges,
                              json_node_init_object(json_node_alloc(), o));
    json_object_unref(o);
}

static void graph_add_child(GraphDump *g, const void *parent,
                            const BdrvChild *c)
{
    graph_add_edge(g, parent, c->bs, c->name, c->perm, c->shared_perm);
}

static JsonArray *graph_list(GList *l)
{
    JsonArray *a = json_array_new();

    for (; l; l = l->next) {
        json_array_add_element(a, l->data);
    }
    return a;
}

JsonNode *bdrv_debug_block_graph(void)
{
    GraphDump g = { .ids = g_hash_table_new(NULL, NULL) };
    JsonObject *o = json_object_new();
    JsonNode *ret;

    for (BlockBackend *blk = blk_next(NULL); blk; blk = blk_next(blk)) {
        uint64_t perm, shared_perm;

        graph_add_vertex(&g, blk, "block-backend", blk_name(blk));
        if (blk_bs(blk)) {
            blk_get_perm(blk, &perm, &shared_perm);
            graph_add_edge(&g, blk, blk_bs(blk), "root", perm, shared_perm);
        }
    }
    for (Job *job = job_next(NULL); job; job = job_next(job)) {
        BlockJob *bjob = block_job_from_job(job);

        if (!bjob) {
            continue;
        }
        graph_add_vertex(&g, bjob, "block-job", job->id);
        for (GSList *l = bjob->nodes; l; l = l->next) {
            graph_add_child(&g, bjob, l->data);
        }
    }
    for (BlockDriverState *bs = bdrv_next_node(NULL); bs;
         bs = bdrv_next_node(bs)) {
        graph_add_vertex(&g, bs, "block-driver", bs->node_name);
        /* QEMU keeps a node's children newest first */
        for (GList *l = g_list_last(bs->children); l; l = l->prev) {
            graph_add_child(&g, bs, l->data);
        }
    }
    json_object_set_array_member(o, "nodes", graph_list(g.nodes));
    json_object_set_array_member(o, "edges", graph_list(g.edges));
    g_list_free(g.nodes);
    g_list_free(g.edges);
    g_hash_table_destroy(g.ids);
    ret = json_node_init_object(json_node_alloc(), o);
    json_object_unref(o);
    return ret;
}
