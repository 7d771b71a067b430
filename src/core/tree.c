/*
 * tree.c - the build tree's places (tree.h). VF_BUILD_TREE and the rest are defined only when
 * this file is compiled for the library the build tree's programs link (vidfeat_core).
 */
#include "core/tree.h"

#include "core/path.h"

const vf_tree *vfi_build_tree(void)
{
#ifdef VF_BUILD_TREE
    static const vf_tree tree = {VF_SOURCE_MODELS_DIR, VF_BUILD_MODELS_DIR, VF_BUILD_MODULE_DIR};
    return vfi_running_under(VF_BUILD_TREE) ? &tree : NULL;
#else
    return NULL;
#endif
}
