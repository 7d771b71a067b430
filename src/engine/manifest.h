/*
 * manifest.h - the model registry: models/NAME.json manifests and the directories searched for
 * them and for the ONNX files they name.
 *
 * Search order, first hit wins: the caller's models_dir, each directory in $VIDFEAT_MODELS
 * (colon-separated), ./models, the source tree's models/ and the build tree's (for running from a
 * build directory) and the installed share/vidfeat/models. An ONNX file is also looked for
 * beside its manifest.
 */
#ifndef VIDFEAT_MANIFEST_H
#define VIDFEAT_MANIFEST_H

#include <stdint.h>

#include "core/status.h"
#include "media/logmel.h"

#define VF_MAX_SEARCH_DIRS 16

typedef struct vf_layer_spec {
    char *name;   /* "fc7" */
    char *tensor; /* the graph tensor it names */
    int dim;      /* feature dimension after pooling/flattening (0 = not stated) */
} vf_layer_spec;

/* A CLIP model's text side ("text" in its manifest): the text tower and its tokenizer. */
typedef struct vf_text_spec {
    char *file;          /* the text tower's ONNX file (token ids [N, context] -> [N, dim]) */
    char *tensor;        /* the embedding's tensor; NULL: the graph's output */
    char *vocab;         /* the tokenizer's BPE vocabulary (a file found as models are) */
    char *vocab_sha256;  /* lower-case hex, or NULL when not stated */
    char *vocab_url;     /* where scripts/fetch-models.sh gets it, or NULL */
    char *vocab_licence; /* the licence file shipped beside it, or NULL */
    int vocab_size;      /* ids (the table's rows) */
    int context;         /* ids a text is cut or padded to */
    int dim;             /* floats of an embedding (the image layer's too) */
} vf_text_spec;

/* An audio model's input ("audio" in its manifest, instead of "input"): the log-mel front end,
 * and how its frames are cut into the network's patches [1, patch, n_mels]. */
typedef struct vf_audio_spec {
    vf_logmel_cfg front;
    int patch;     /* frames a patch (VGGish: 96, 0.96 s) */
    int patch_hop; /* frames between patches' starts */
} vf_audio_spec;

typedef struct vf_manifest {
    char *path; /* the manifest file */
    char *dir;  /* its directory */
    char *name;
    char *description;
    char *file;        /* ONNX file name */
    char *sha256;      /* lower-case hex, or NULL when not known */
    int64_t size;      /* the official file's bytes, 0 when not known */
    char *url;         /* official download address, or NULL */
    char *export_hint; /* how to produce the file locally, or NULL */
    int input_size;    /* an image model's side; 0 for an audio model */
    int frames; /* a clip model's frames per window (its file must agree); 0: an image model */
    vf_channel_order channel_order;
    vf_resize_policy resize;
    int resize_short;
    int resize_to[2]; /* VF_RESIZE_FIXED_CROP: height, width */
    float mean[3], std[3];
    vf_layer_spec *layers; /* first = default */
    int n_layers;
    vf_text_spec *text;   /* a CLIP model's text side, or NULL */
    vf_audio_spec *audio; /* an audio model's front end, or NULL (an image or clip model) */
} vf_manifest;

/* Parse one manifest. VF_ERR_UNSUPPORTED if the JSON is not a vidfeat manifest (no
 * "vidfeat_manifest" key), VF_ERR_INVALID if it is one but malformed. */
vf_status vfi_manifest_load(const char *path, vf_manifest **out, vf_err *err);
void vfi_manifest_free(vf_manifest **pm);

/* The search directories (borrowed strings; env_buf holds a copy of $VIDFEAT_MODELS and the
 * installed directory where the installation is now). */
int vfi_models_search_path(const char *models_dir, const char **dirs, char *env_buf,
                           size_t env_size);

/* Find the manifest called name; VF_ERR_IO when there is none. */
vf_status vfi_manifest_find(const char *models_dir, const char *name, vf_manifest **out,
                            vf_err *err);

/* Visit every vidfeat manifest in the search directories, in search order. visit() owns m; it
 * returns VF_OK to go on, VF_EOF to stop, or a failure to abort (returned as is). Malformed
 * manifests are logged and skipped, other JSON files skipped silently. */
vf_status vfi_manifest_foreach(const char *models_dir,
                               vf_status (*visit)(void *user, vf_manifest *m), void *user);

/* Find a manifest whose "file" equals base (the basename of an ONNX path); VF_ERR_IO if none. */
vf_status vfi_manifest_find_by_file(const char *models_dir, const char *base, vf_manifest **out,
                                    vf_err *err);

/* Where the manifest's ONNX file is: a path to free with vfi_free(), or NULL when nowhere. */
char *vfi_manifest_locate_file(const char *models_dir, const vf_manifest *m);
/* The same for another file a manifest names (its text tower, its vocabulary): the search
 * directories, then the manifest's own. */
char *vfi_manifest_locate(const char *models_dir, const vf_manifest *m, const char *file);

/* The ONNX metadata_props key scripts/export-torchvision.py sets: "random (seed N)" for seeded
 * random weights, "torchvision ImageNet" for its --pretrained ones. */
#define VFI_WEIGHTS_KEY "vidfeat_weights"

/* What the weights of the ONNX file at path are: random when its metadata says so; else, with
 * a manifest that has a sha256 (m may be NULL), official or other by size and SHA-256 (hashed
 * through the digest cache, once per file version); else unknown, as when the file cannot be
 * read (loading it says why). */
vf_weights_kind vfi_model_weights(const vf_manifest *m, const char *path);

#endif /* VIDFEAT_MANIFEST_H */
