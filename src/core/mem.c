/*
 * mem.c - allocation wrappers. With VF_TEST_HOOKS the wrappers count allocations and can fail the
 * N-th one, which is how test_alloc_fail walks every failure path. The counter is the one piece of
 * process-wide state, and it exists only in test builds.
 */
#include "core/mem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#ifdef VF_TEST_HOOKS
#include <stdatomic.h>
static atomic_long fail_at;  /* 0: never fail */
static atomic_long n_allocs; /* counted since the last vfi_mem_fail_after() */

static int should_fail(void)
{
    long n = atomic_fetch_add(&n_allocs, 1) + 1;
    long at = atomic_load(&fail_at);
    return at > 0 && n == at;
}

long vfi_mem_fail_after(long n)
{
    long counted = atomic_exchange(&n_allocs, 0);
    atomic_store(&fail_at, n);
    return counted;
}
#else
static int should_fail(void)
{
    return 0;
}

long vfi_mem_fail_after(long n)
{
    (void)n;
    return 0;
}
#endif

void *vfi_malloc(size_t size)
{
    if (should_fail())
        return NULL;
    return malloc(size ? size : 1);
}

void *vfi_calloc(size_t n, size_t size)
{
    if (should_fail())
        return NULL;
    if (n == 0 || size == 0)
        return calloc(1, 1);
    return calloc(n, size);
}

void *vfi_mallocarray(size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    return vfi_malloc(n * size);
}

void *vfi_grow(void *ptr, int *cap, int need, size_t elem_size)
{
    if (need <= *cap)
        return ptr;
    int n = *cap ? *cap : 64;
    while (n < need) {
        if (n > INT32_MAX / 2)
            return NULL;
        n *= 2;
    }
    void *p = vfi_realloc(ptr, (size_t)n * elem_size);
    if (p)
        *cap = n;
    return p;
}

void *vfi_realloc(void *ptr, size_t size)
{
    if (should_fail())
        return NULL;
    return realloc(ptr, size ? size : 1);
}

void *vfi_aligned_alloc(size_t align, size_t size)
{
    void *p = NULL;
    if (should_fail())
        return NULL;
    if (posix_memalign(&p, align, size ? size : align) != 0)
        return NULL;
    return p;
}

void vfi_free(void *ptr)
{
    free(ptr);
}

char *vfi_strdup(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *d = vfi_malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

double vfi_mem_usable(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    double phys = pages > 0 && size > 0 ? (double)pages * (double)size : 0.0;
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (phys <= 0.0 || (double)rl.rlim_cur < phys))
        phys = (double)rl.rlim_cur;
    return phys;
}
