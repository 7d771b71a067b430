/*
 * backend.c - the registry of the backends this build has and the "auto" choice; loads the
 * run-time modules (dlopen). The only file that knows which backends exist (and the only one
 * that reads VF_HAVE_CUDA).
 */
#define _GNU_SOURCE /* RTLD_NODELETE */
#include "engine/backend.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/mem.h"
#include "core/path.h"
#include "core/tree.h"

/* "auto" tries them in this order; ref is never picked by "auto". */
static const vf_backend_entry registry[] = {
#if VF_HAVE_CUDA
    {"cuda", "NVIDIA GPU: cuDNN and cuBLAS", NULL, "libvidfeat-cuda.so", "libcuda.so.1",
     "no NVIDIA driver found"},
#endif
    {"dnnl", NULL, &vfi_backend_dnnl, NULL, NULL, NULL},
    {"ref", NULL, &vfi_backend_ref, NULL, NULL, NULL},
};
#define N_BACKENDS (sizeof(registry) / sizeof(*registry))

size_t vfi_backend_list(const vf_backend_entry **list)
{
    *list = registry;
    return N_BACKENDS;
}

static const vf_backend_entry *find(const char *name)
{
    for (size_t i = 0; i < N_BACKENDS; i++) {
        if (strcmp(registry[i].name, name) == 0)
            return &registry[i];
    }
    return NULL;
}

/* Load the module file at path: its ops once it is the one this library was built with. */
static vf_status load_file(const char *path, void **handle, const vf_backend_ops **ops, vf_err *err)
{
    /* never unloaded (NODELETE): the GPU libraries it pulls in register exit handlers */
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!h)
        return vfi_fail(err, VF_ERR_NO_DEVICE, "%s", dlerror());
    vf_backend_module_fn entry = NULL;
    *(void **)&entry = dlsym(h, VF_BACKEND_MODULE_SYMBOL); /* POSIX's way to a function */
    const vf_backend_module *m = entry ? entry() : NULL;
    static const size_t sizes[] = VF_BACKEND_SIZES;
    if (!m || m->abi != VF_BACKEND_ABI || !m->version || strcmp(m->version, VF_VERSION_STRING) ||
        memcmp(m->sizes, sizes, sizeof(sizes)) || !m->ops) {
        dlclose(h);
        return vfi_fail(err, VF_ERR_NO_DEVICE,
                        "%s: not a module of this vidfeat (%s): rebuild and install them together",
                        path, VF_VERSION_STRING);
    }
    *handle = h;
    *ops = m->ops;
    return VF_OK;
}

/* Load e's module: its driver first (cheap, and the clearest thing to say on a machine without
 * one), then the module from the first directory that has it. */
static vf_status load_module(const vf_backend_entry *e, void **handle, const vf_backend_ops **ops,
                             vf_err *err)
{
    if (e->driver) {
        void *d = dlopen(e->driver, RTLD_LAZY | RTLD_LOCAL);
        if (!d)
            return vfi_fail(err, VF_ERR_NO_DEVICE, "%s (%s)", e->no_driver, dlerror());
        dlclose(d);
    }
    const char *env = getenv("VIDFEAT_MODULE_DIR");
    char moved[4096];
    int have_moved =
        vfi_installed_path(VF_MODULES_FROM_LIB, VF_MODULES_FROM_BIN, moved, sizeof(moved));
    /* $VIDFEAT_MODULE_DIR alone; else this build tree's (run from it), the installation's where
     * it is now (moved with its prefix), where it was installed */
    const vf_tree *tree = vfi_build_tree();
    const char *dirs[] = {env && env[0] ? env
                          : tree        ? tree->modules
                                        : VF_INSTALL_MODULE_DIR,
                          env && env[0] ? NULL
                          : have_moved  ? moved
                                        : VF_INSTALL_MODULE_DIR,
                          env && env[0] ? NULL : VF_INSTALL_MODULE_DIR};
    vf_err first = {VF_OK, ""};
    char path[4096];
    for (size_t i = 0; i < sizeof(dirs) / sizeof(*dirs) && dirs[i]; i++) {
        snprintf(path, sizeof(path), "%s/%s", dirs[i], e->module);
        vf_err why = {VF_OK, ""};
        if (load_file(path, handle, ops, &why) >= 0)
            return VF_OK;
        /* a missing file says less than one that is there and will not load */
        if (first.code == VF_OK || strstr(first.msg, "No such file"))
            first = why;
    }
    return vfi_fail(err, VF_ERR_NO_DEVICE, "the %s backend cannot be loaded: %s", e->name,
                    first.msg);
}

static vf_status open_entry(const vf_backend_entry *e, const vf_backend_opts *opts,
                            vf_backend **out, vf_err *err)
{
    const vf_backend_ops *ops = e->ops;
    void *module = NULL;
    if (!ops && load_module(e, &module, &ops, err) < 0)
        return err->code;
    vf_status rc = ops->probe(err);
    vf_backend *b = rc < 0 ? NULL : vfi_calloc(1, sizeof(*b));
    if (rc >= 0 && !b)
        rc = vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    if (rc < 0) {
        if (module)
            dlclose(module);
        return rc;
    }
    b->ops = ops;
    b->module = module;
    b->opts = *opts;
    rc = ops->init(b, opts);
    if (rc < 0) {
        *err = b->err;
        vfi_backend_free(&b);
        return rc;
    }
    *out = b;
    return VF_OK;
}

void vfi_backend_library_version(const vf_backend_entry *e, char *buf, size_t size)
{
    snprintf(buf, size, "built in");
    const vf_backend_ops *ops = e->ops;
    void *module = NULL;
    vf_err err = {VF_OK, ""};
    if (!ops && load_module(e, &module, &ops, &err) < 0) {
        snprintf(buf, size, "%s", err.msg);
        return;
    }
    if (ops->library_version)
        ops->library_version(buf, size);
    if (module)
        dlclose(module);
}

vf_status vfi_backend_open(const char *name, const vf_backend_opts *opts, vf_backend **out,
                           vf_err *err)
{
    if (!name || !strcmp(name, "auto")) {
        vf_err first;
        vfi_err_clear(&first);
        for (size_t i = 0; i < N_BACKENDS; i++) {
            if (registry[i].ops == &vfi_backend_ref)
                continue;
            vf_status rc = open_entry(&registry[i], opts, out, err);
            if (rc >= 0) {
                vfi_log(VF_LOG_INFO, "backend", "auto: using %s", registry[i].name);
                return rc;
            }
            /* the error told is the first backend's that is there but refused the run (the CPU
             * backend refusing bf16 says more than a GPU that is not there) */
            int absent = err->code == VF_ERR_NO_DEVICE || err->code == VF_ERR_NOT_BUILT;
            int first_absent = first.code == VF_ERR_NO_DEVICE || first.code == VF_ERR_NOT_BUILT;
            if (first.code == VF_OK || (first_absent && !absent))
                first = *err;
            vfi_log(VF_LOG_INFO, "backend", "auto: %s not usable: %s", registry[i].name, err->msg);
        }
        *err = first;
        return first.code < 0 ? first.code : vfi_fail(err, VF_ERR_NO_DEVICE, "no backend");
    }
    const char *real = !strcmp(name, "cpu") ? "dnnl" : !strcmp(name, "gpu") ? "cuda" : name;
    const vf_backend_entry *e = find(real);
    if (!e) {
        if (!strcmp(real, "cuda"))
            return vfi_fail(err, VF_ERR_NOT_BUILT,
                            "this build has no CUDA backend (rebuild with -DVIDFEAT_CUDA=ON on a "
                            "machine with the CUDA toolkit, cuBLAS and cuDNN)");
        return vfi_fail(err, VF_ERR_INVALID, "unknown backend '%s' (use auto, cpu, ref or cuda)",
                        name);
    }
    return open_entry(e, opts, out, err);
}

void *vfi_backend_host_alloc(vf_backend *b, size_t size)
{
    if (b && b->ops->host_alloc)
        return b->ops->host_alloc(b, size);
    return vfi_aligned_alloc(VF_TENSOR_ALIGN, size);
}

void vfi_backend_host_free(vf_backend *b, void *ptr)
{
    if (!ptr)
        return;
    if (b && b->ops->host_free)
        b->ops->host_free(b, ptr);
    else
        vfi_free(ptr);
}

void *vfi_backend_input_alloc(vf_backend *b, size_t size)
{
    if (b->ops->input_alloc)
        return b->ops->input_alloc(b, size);
    void *p = vfi_backend_host_alloc(b, size);
    if (p)
        memset(p, 0, size);
    return p;
}

void vfi_backend_input_free(vf_backend *b, void *input)
{
    if (input && b->ops->input_free)
        b->ops->input_free(b, input);
    else
        vfi_backend_host_free(b, input);
}

int vfi_backend_input_host(const vf_backend *b)
{
    return !b->ops->input_alloc;
}

vf_status vfi_backend_copy(vf_backend *b, vf_converter *cv, void *dst, const void *src, size_t size,
                           int from_host, vf_err *err)
{
    if (b->ops->input_alloc)
        return b->ops->copy(b, cv, dst, src, size, from_host, err);
    memmove(dst, src, size);
    return VF_OK;
}

vf_status vfi_backend_run_input(vf_backend *b, const void *input, float *out, int n)
{
    if (b->ops->run_input)
        return b->ops->run_input(b, input, out, n);
    return b->ops->run(b, input, out, n);
}

void vfi_backend_free(vf_backend **pb)
{
    vf_backend *b = pb ? *pb : NULL;
    if (!b)
        return;
    if (b->ops && b->ops->destroy)
        b->ops->destroy(b);
    if (b->module)
        dlclose(b->module); /* after destroy: the ops are the module's */
    vfi_free(b);
    *pb = NULL;
}
