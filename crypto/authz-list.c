/*
 * The authz-list object type: an ordered list of rules, each matching an
 * identity exactly or as a glob (fnmatch(3), as QEMU's) and saying allow
 * or deny; the first rule that matches decides, else the list's own
 * policy (deny by default).  QEMU's --object authz-list,id=ID,
 * policy=deny,rules.0.match=*CN=client1,rules.0.policy=allow,
 * rules.0.format=glob.  authz-list-file (crypto/authz-list-file.c) reads
 * the same properties from a file.
 */
#include "util/osdep.h"

#include <fnmatch.h>

#include "crypto/tls-authz.h"
#include "util/json.h"
#include "util/user-object.h"

typedef struct QAuthZListRule {
    char *match;
    bool allow;
    bool glob;
} QAuthZListRule;

typedef struct QAuthZList {
    QAuthZ parent;
    bool allow;                 /* when no rule matches */
    QAuthZListRule *rules;
    guint nr_rules;
} QAuthZList;

static bool authz_list_is_allowed(QAuthZ *parent, const char *identity)
{
    QAuthZList *authz = container_of(parent, QAuthZList, parent);

    for (guint i = 0; i < authz->nr_rules; i++) {
        const QAuthZListRule *rule = &authz->rules[i];
        bool match = rule->glob ? fnmatch(rule->match, identity, 0) == 0
                                : strcmp(rule->match, identity) == 0;

        if (match) {
            return rule->allow;
        }
    }
    return authz->allow;
}

QAuthZ *qauthz_list_new(JsonObject *props)
{
    QAuthZList *authz = g_new0(QAuthZList, 1);
    JsonArray *rules = json_object_has_member(props, "rules")
        ? json_object_get_array_member(props, "rules") : NULL;

    authz->parent.is_allowed = authz_list_is_allowed;
    authz->allow = !strcmp(json_object_get_string_member_with_default(
                               props, "policy", "deny"), "allow");
    authz->nr_rules = rules ? json_array_get_length(rules) : 0;
    authz->rules = g_new0(QAuthZListRule, authz->nr_rules);
    for (guint i = 0; i < authz->nr_rules; i++) {
        JsonObject *rule = json_array_get_object_element(rules, i);

        authz->rules[i] = (QAuthZListRule) {
            .match = g_strdup(json_object_get_string_member(rule, "match")),
            .allow = !strcmp(json_object_get_string_member(rule, "policy"),
                             "allow"),
            .glob = !strcmp(json_object_get_string_member_with_default(
                                rule, "format", "exact"), "glob"),
        };
    }
    return &authz->parent;
}

void qauthz_list_free(QAuthZ *parent)
{
    QAuthZList *authz = container_of(parent, QAuthZList, parent);

    for (guint i = 0; i < authz->nr_rules; i++) {
        g_free(authz->rules[i].match);
    }
    g_free(authz->rules);
    g_free(authz);
}

static void *authz_list_create(const char *id, JsonObject *props,
                               Error **errp)
{
    return qauthz_list_new(props);
}

static void authz_list_destroy(void *state)
{
    qauthz_list_free(state);
}

static const UserObjectType authz_list_type = {
    .name = "authz-list",
    .create = authz_list_create,
    .destroy = authz_list_destroy,
};
user_object_type_init(authz_list_type)
