/*
 * backend.c - the registry of compiled-in backends and the "auto" choice. The only file that
 * knows which backends exist (and the only one that reads VF_HAVE_CUDA).
 */
#include "engine/backend.h"

#include <string.h>

#include "core/log.h"
#include "core/mem.h"

static const vf_backend_ops *const registry[] = {
/* "auto" tries them in this order; ref is never picked by "auto". */
#if VF_HAVE_CUDA
    &vfi_backend_cuda,
#endif
    &vfi_backend_dnnl,
    &vfi_backend_ref,
};

size_t vfi_backend_list(const vf_backend_ops *const **list)
{
    *list = registry;
    return sizeof(registry) / sizeof(*registry);
}

static const vf_backend_ops *find(const char *name)
{
    for (size_t i = 0; i < sizeof(registry) / sizeof(*registry); i++) {
        if (strcmp(registry[i]->name, name) == 0)
            return registry[i];
    }
    return NULL;
}

static vf_status open_ops(const vf_backend_ops *ops, const vf_backend_opts *opts, vf_backend **out,
                          vf_err *err)
{
    vf_status rc = ops->probe(err);
    if (rc < 0)
        return rc;
    vf_backend *b = vfi_calloc(1, sizeof(*b));
    if (!b)
        return vfi_fail(err, VF_ERR_NOMEM, "out of memory");
    b->ops = ops;
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

vf_status vfi_backend_open(const char *name, const vf_backend_opts *opts, vf_backend **out,
                           vf_err *err)
{
    if (!name || !strcmp(name, "auto")) {
        vf_err first;
        vfi_err_clear(&first);
        for (size_t i = 0; i < sizeof(registry) / sizeof(*registry); i++) {
            if (registry[i] == &vfi_backend_ref)
                continue;
            vf_status rc = open_ops(registry[i], opts, out, err);
            if (rc >= 0) {
                vfi_log(VF_LOG_INFO, "backend", "auto: using %s", registry[i]->name);
                return rc;
            }
            if (first.code == VF_OK)
                first = *err;
            vfi_log(VF_LOG_INFO, "backend", "auto: %s not usable: %s", registry[i]->name, err->msg);
        }
        *err = first;
        return first.code < 0 ? first.code : vfi_fail(err, VF_ERR_NO_DEVICE, "no backend");
    }
    const char *real = !strcmp(name, "cpu") ? "dnnl" : !strcmp(name, "gpu") ? "cuda" : name;
    const vf_backend_ops *ops = find(real);
    if (!ops) {
        if (!strcmp(real, "cuda"))
            return vfi_fail(err, VF_ERR_NOT_BUILT,
                            "this build has no CUDA backend (rebuild with -DVIDFEAT_CUDA=ON on a "
                            "machine with the CUDA toolkit, cuBLAS and cuDNN)");
        return vfi_fail(err, VF_ERR_INVALID, "unknown backend '%s' (use auto, cpu, ref or cuda)",
                        name);
    }
    return open_ops(ops, opts, out, err);
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
    vfi_free(b);
    *pb = NULL;
}
