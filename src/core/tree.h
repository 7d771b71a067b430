/*
 * tree.h - the build tree's places, for vidfeat's code running from the tree it was built in (the
 * build's own command, the tests): where its model manifests and run-time modules are before they
 * are installed. The installed libraries are built without them (tree.c is compiled once per
 * library, like mem.c), so that no path of the build or source tree is kept in an installed file,
 * and an installed copy never looks there.
 */
#ifndef VIDFEAT_TREE_H
#define VIDFEAT_TREE_H

typedef struct vf_tree {
    const char *source_models; /* the source tree's models/ (the manifests) */
    const char *build_models;  /* what the build makes beside them (CLIP's vocabulary) */
    const char *modules;       /* the run-time modules built (libvidfeat-cuda.so) */
} vf_tree;

/* The build tree's places when this code runs from a file under it, else NULL. Any thread. */
const vf_tree *vfi_build_tree(void);

#endif /* VIDFEAT_TREE_H */
