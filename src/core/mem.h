/*
 * mem.h - every allocation in the library goes through here, so that limits are checked in one
 * place and tests can make the N-th allocation fail.
 */
#ifndef VIDFEAT_MEM_H
#define VIDFEAT_MEM_H

#include <stddef.h>

/* Alignment of tensor buffers: one cache line, what AVX-512 loads like. */
#define VF_TENSOR_ALIGN 64

void *vfi_malloc(size_t size);
void *vfi_calloc(size_t n, size_t size);
/* n * size with an overflow check; NULL on overflow. */
void *vfi_mallocarray(size_t n, size_t size);
void *vfi_realloc(void *ptr, size_t size);
/* A buffer aligned to `align` (a power of two, >= sizeof(void *)); free with vfi_free(). */
void *vfi_aligned_alloc(size_t align, size_t size);
void vfi_free(void *ptr);
/* The array `ptr` (*cap elements of elem_size bytes) made to hold at least `need` elements,
 * doubling from 64: the (possibly moved) array, *cap updated. NULL when out of memory, with ptr
 * and *cap untouched. */
void *vfi_grow(void *ptr, int *cap, int need, size_t elem_size);
/* strdup through vfi_malloc; NULL in, NULL out. */
char *vfi_strdup(const char *s);

/* Bytes of memory this process may use: the machine's (physical pages), or less where its
 * address-space limit (RLIMIT_AS) says so; 0 when unknown. For refusing, before allocating, a
 * working set that cannot fit (a batch, every vector of an archive). */
double vfi_mem_usable(void);

/* Test hook: make the n-th allocation from now fail (n >= 1), 0 to disable. Returns the number of
 * allocations counted since the last call. Not thread-safe by design: tests call it between runs.
 * Compiled to a no-op unless VF_TEST_HOOKS is defined. */
long vfi_mem_fail_after(long n);

#endif /* VIDFEAT_MEM_H */
