/*
 * backend.h - the contract between the engine and a compute backend (STYLE 2.7).
 *
 * A backend turns a finished vf_graph (one input: images [N, C, H, W] or token ids [N, T]; one
 * output [N, D]; topological order) into something it can run on batches. Lifecycle: probe ->
 * init -> prepare (once, on the thread that will call run) -> run (per batch, blocking) ->
 * destroy. Each backend lives in one
 * file and exports exactly one ops table (a run-time module: through its one exported function,
 * below); backend.c is the only place that lists them.
 */
#ifndef VIDFEAT_BACKEND_H
#define VIDFEAT_BACKEND_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/graph.h"
#include "media/yuvconv.h"

typedef struct vf_backend vf_backend;

/* A backend's per-thread frame converter (see convert below); its type is the backend's. */
typedef struct vf_converter vf_converter;

typedef struct vf_backend_opts {
    /* The backend may free a graph constant's data (setting it to NULL) once it holds its own
     * copy, so that weights are not kept twice. Only for a graph no one else runs. */
    int release_weights;
    int device;    /* GPU ordinal; ignored by CPU backends */
    int n_threads; /* 0 = backend default */
    vf_precision precision;
    /* int8: the largest |x| of every activation, indexed like the graph's values (a calibration
     * file's); prepare builds int8 plans from them at once. NULL: the first runs calibrate. Read
     * during prepare only. */
    const float *int8_ranges;
    /* int8 without ranges: images run() observes in f32 before it quantizes; 0 = one batch. */
    int64_t calibration_images;
    /* int8: convolutions and inner products summing fewer products per output stay f32 (their
     * rounding does not average out); 0 = the backend's default. Tests lower it to put small
     * operator models through the int8 kernels. */
    int int8_min_products;
} vf_backend_opts;

typedef struct vf_backend_ops {
    const char *name; /* "dnnl", "ref", "cuda": what --backend accepts */
    const char *description;
    int is_gpu;

    /* Can this backend run here and now? Cheap, no lasting side effects. VF_OK, or
     * VF_ERR_NO_DEVICE with the reason in *err. */
    vf_status (*probe)(vf_err *err);

    /* Allocate private state into b->ctx; VF_ERR_UNSUPPORTED for a precision it lacks. */
    vf_status (*init)(vf_backend *b, const vf_backend_opts *opts);

    /* (optional) Whether this backend runs node nd of g: VF_OK, or VF_ERR_UNSUPPORTED (with the
     * reason in *err when there is more to say than the operator's name). prepare asks it of
     * every node first (vfi_backend_check_ops), so a refusal names the node before anything
     * is built. Without it: every operator. */
    vf_status (*supports)(vf_backend *b, const vf_graph *g, const vf_node *nd, vf_err *err);

    /* Compile g for batches of up to max_batch images. g is borrowed and must outlive the
     * backend (weights may be used in place, or freed: see release_weights). Called once. */
    vf_status (*prepare)(vf_backend *b, vf_graph *g, int max_batch);

    /* Run n <= max_batch inputs: in is host memory holding the graph input's type - f32
     * images [n, C, H, W], or a text tower's int64 token ids [n, context] - and out host f32
     * [n, D]. Blocking; on VF_OK out is complete. Does not allocate. */
    vf_status (*run)(vf_backend *b, const void *in, float *out, int n);

    /* (optional) Text describing what prepare chose (kernels, memory), for --verbose; NULL if
     * none. Borrowed from the backend. */
    const char *(*describe)(vf_backend *b);

    /* (optional) Host memory the backend copies from and to fastest (pinned memory for a GPU),
     * for the batch tensors run() is given; NULL on failure. Free with host_free. Without
     * these entries: vfi_aligned_alloc / vfi_free. Callable from any thread after prepare. */
    void *(*host_alloc)(vf_backend *b, size_t size);
    void (*host_free)(vf_backend *b, void *ptr);

    /* (optional) The device the backend runs on, as its driver names it ("NVIDIA H100 80GB
     * HBM3"); borrowed from the backend. NULL (or no entry): the host CPU. */
    const char *(*device_name)(vf_backend *b);

    /* (optional) int8 calibration: the largest |x| observed so far per graph value (indexed like
     * g->values; borrowed), *n_images the images they were observed on and *complete 1 once
     * the backend has quantized with them. NULL when it has observed nothing (not int8, or its
     * ranges came from opts.int8_ranges). */
    const float *(*int8_ranges)(vf_backend *b, int64_t *n_images, int *complete);

    /* (optional, all four or none) Batch inputs in the backend's own memory (a GPU's), where
     * frames are converted next to the network. Without them a batch input is host memory from
     * host_alloc and run() reads it. After prepare; input_alloc, input_free and copy from any
     * thread. input_alloc: size bytes of it, zeroed, or NULL. run_input: run() reading the first
     * n rows of such an input. copy: size bytes from src (host memory when from_host, else input
     * memory) to dst (input memory), not overlapping; on cv's stream when cv is not NULL, and
     * complete on return either way; errors go to *err. */
    void *(*input_alloc)(vf_backend *b, size_t size);
    void (*input_free)(vf_backend *b, void *input);
    vf_status (*run_input)(vf_backend *b, const void *input, float *out, int n);
    vf_status (*copy)(vf_backend *b, vf_converter *cv, void *dst, const void *src, size_t size,
                      int from_host, vf_err *err);

    /* (optional, all three or none) Frame conversion by the backend, as yuvconv.h defines it. A
     * converter is used by one thread at a time (a GPU's has its own stream and staging
     * memory); several convert into different rows of one input at once. After prepare, any
     * thread; errors go to *err, not b->err. convert: the YUV picture in planes (host memory,
     * or the backend device's memory when on_device: a hardware decoder's frame) into slot,
     * 3 x q->size^2 floats of a batch input (input_alloc's memory where the backend has it,
     * else host memory). Returns once planes are no longer read and slot is written. */
    vf_status (*converter_new)(vf_backend *b, vf_converter **out, vf_err *err);
    void (*converter_free)(vf_backend *b, vf_converter *cv);
    vf_status (*convert)(vf_backend *b, vf_converter *cv, const vf_yuv_params *q,
                         const vf_yuv_planes *planes, int on_device, float *slot, vf_err *err);

    /* (optional) Write the underlying library's name and version into buf. */
    void (*library_version)(char *buf, size_t size);

    /* Release everything init/prepare acquired; copes with a partial init. */
    void (*destroy)(vf_backend *b);
} vf_backend_ops;

struct vf_backend {
    const vf_backend_ops *ops; /* static table (a module's while it is loaded), never freed */
    void *ctx;                 /* backend-private state */
    void *module;              /* the module's handle (dlopen), closed after destroy; or NULL */
    vf_backend_opts opts;
    vf_err err; /* detail of the last failing call */
    /* (optional) set by the owner: when it reads non-zero, run() stops between layers and
     * returns VF_ERR_CANCELLED. */
    const atomic_int *cancel;
};

/* Resolve a name ("auto", "cpu" = "dnnl", "ref", "cuda", "gpu" = "cuda"), probe and init it.
 * VF_ERR_NOT_BUILT for a backend not compiled in, VF_ERR_NO_DEVICE when its probe fails,
 * VF_ERR_INVALID for an unknown name. */
/* Every node of g checked against b's supports, at the start of prepare: VF_OK, or
 * VF_ERR_UNSUPPORTED in b->err naming the first node b does not run. Inline, so that a backend
 * built as a module has it without the registry. */
static inline vf_status vfi_backend_check_ops(vf_backend *b, const vf_graph *g)
{
    for (int i = 0; b->ops->supports && i < g->n_nodes; i++) {
        const vf_node *nd = &g->nodes[i];
        vf_err why = {0};
        if (b->ops->supports(b, g, nd, &why) >= 0)
            continue;
        if (why.msg[0])
            return vfi_fail(&b->err, VF_ERR_UNSUPPORTED, "node '%s' (%s): %s", nd->name,
                            vfi_op_name(nd->op), why.msg);
        return vfi_fail(&b->err, VF_ERR_UNSUPPORTED, "node '%s': %s is not in the %s backend",
                        nd->name, vfi_op_name(nd->op), b->ops->name);
    }
    return VF_OK;
}

vf_status vfi_backend_open(const char *name, const vf_backend_opts *opts, vf_backend **out,
                           vf_err *err);
void vfi_backend_free(vf_backend **pb);

/* Host buffers for a backend's batch tensors: its host_alloc where it has one (pinned memory for
 * a GPU), else 64-byte aligned heap memory. b may be NULL. */
void *vfi_backend_host_alloc(vf_backend *b, size_t size);
void vfi_backend_host_free(vf_backend *b, void *ptr);

/* Batch inputs and frame conversion through the entries above, with host memory and host code
 * standing in for a backend that lacks them. input_alloc: zeroed; NULL on failure. input_host
 * says whether an input is host memory (frames may be converted straight into it). copy: dst
 * and src may overlap for host inputs; cv may be NULL for those. run_input: n rows. */
void *vfi_backend_input_alloc(vf_backend *b, size_t size);
void vfi_backend_input_free(vf_backend *b, void *input);
int vfi_backend_input_host(const vf_backend *b);
vf_status vfi_backend_copy(vf_backend *b, vf_converter *cv, void *dst, const void *src, size_t size,
                           int from_host, vf_err *err);
vf_status vfi_backend_run_input(vf_backend *b, const void *input, float *out, int n);

/* A backend this build has: built in (ops), or a run-time module (module: its file name) that
 * is loaded when the backend is opened, so that the library and the command start on machines
 * without the module's libraries (the CUDA backend: no CUDA, cuDNN or cuBLAS needed unless it
 * runs). A module is looked for in $VIDFEAT_MODULE_DIR when that is set (and only there), else
 * in the build tree's lib/vidfeat, then in the installed LIBDIR/vidfeat. */
typedef struct vf_backend_entry {
    const char *name;          /* as ops->name */
    const char *description;   /* a module's (a built-in one's is ops->description) */
    const vf_backend_ops *ops; /* built in; NULL for a module */
    const char *module;        /* "libvidfeat-cuda.so" */
    const char *driver;        /* a library that must load before the module is tried, or NULL */
    const char *no_driver;     /* what to say when it does not ("no NVIDIA driver found") */
} vf_backend_entry;

/* The backends of this build, in "auto" order; returns the count. */
size_t vfi_backend_list(const vf_backend_entry **list);

/* The backend's libraries and their versions into buf (a module: loaded for it, or why it
 * cannot be). */
void vfi_backend_library_version(const vf_backend_entry *e, char *buf, size_t size);

extern const vf_backend_ops vfi_backend_ref;  /* backend_ref.c */
extern const vf_backend_ops vfi_backend_dnnl; /* backend_dnnl.c */

/* ---- run-time modules ------------------------------------------------------------------- */

/* A module exports one function, VF_BACKEND_MODULE_SYMBOL, returning this. The sizes and the
 * version tie it to the library it was built with: one that does not match is refused. */
#define VF_BACKEND_ABI           1
#define VF_BACKEND_MODULE_SYMBOL "vfi_backend_module"
typedef struct vf_backend_module {
    int abi;             /* VF_BACKEND_ABI */
    const char *version; /* the vidfeat version it was built as */
    size_t sizes[5];     /* VF_BACKEND_SIZES as it was built */
    const vf_backend_ops *ops;
} vf_backend_module;
#define VF_BACKEND_SIZES                                                                           \
    {                                                                                              \
        sizeof(vf_backend_ops), sizeof(vf_backend), sizeof(vf_backend_opts), sizeof(vf_graph),     \
            sizeof(vf_value)                                                                       \
    }
typedef const vf_backend_module *(*vf_backend_module_fn)(void);

#endif /* VIDFEAT_BACKEND_H */
