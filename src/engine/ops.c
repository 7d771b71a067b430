/*
 * ops.c - the operator descriptors: op_list.h's rows as data (graph.h's vf_op_desc).
 */
#include "engine/graph.h"
#include "engine/shape.h"

#define VF_OP_DESC_(id, nm, params, rule, fl)                                                      \
    [VF_OP_##id] = {.name = nm,                                                                    \
                    .param_size = sizeof(((vf_node *)0)->p.params),                                \
                    .flags = (fl),                                                                 \
                    .shape = vfi_shape_##rule},
static const vf_op_desc descs[] = {VF_OP_LIST(VF_OP_DESC_)};
#undef VF_OP_DESC_

_Static_assert(sizeof(descs) / sizeof(descs[0]) == VF_OP_COUNT_, "one descriptor per operator");

const vf_op_desc *vfi_op_desc(vf_op op)
{
    return (unsigned)op < VF_OP_COUNT_ ? &descs[op] : NULL;
}

const char *vfi_op_name(vf_op op)
{
    return (unsigned)op < VF_OP_COUNT_ ? descs[op].name : "?";
}
