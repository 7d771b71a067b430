/*
 * fuzz_alloc.cpp - for fuzz_index only: while fuzz_alloc_limit has set a limit (around reading
 * an index), operator new refuses a request above it with std::bad_alloc, as it would on a
 * machine without that memory. vidfeat checks an index file's sizes against its length before
 * FAISS reads it (search/faiss_file.c); this is the second guard, for a size that check would
 * let through: vidfeat catches the bad_alloc and refuses the file (search/ann_faiss.cpp), but AddressSanitizer's own operator new ends the process on
 * a request it cannot meet instead of throwing, and what FAISS leaks when it throws mid-read
 * (tests/lsan.supp) would otherwise pile up zeroed gigabytes under the fuzzer's memory limit.
 * The seeds' largest block is far smaller; the blocks come from malloc, which the sanitizer
 * still watches. libFuzzer's own allocations happen with no limit set.
 */
#include <atomic>
#include <cstdlib>
#include <new>

static std::atomic<std::size_t> limit{0}; /* 0: none */

extern "C" void fuzz_alloc_limit(std::size_t bytes);
extern "C" void fuzz_alloc_limit(std::size_t bytes)
{
    limit = bytes;
}

static void *fuzz_new(std::size_t n)
{
    std::size_t max = limit.load();
    if (max && n > max)
        throw std::bad_alloc();
    void *p = std::malloc(n ? n : 1);
    if (!p)
        throw std::bad_alloc();
    return p;
}

void *operator new(std::size_t n)
{
    return fuzz_new(n);
}

void *operator new[](std::size_t n)
{
    return fuzz_new(n);
}

void operator delete(void *p) noexcept
{
    std::free(p);
}

void operator delete[](void *p) noexcept
{
    std::free(p);
}

void operator delete(void *p, std::size_t) noexcept
{
    std::free(p);
}

void operator delete[](void *p, std::size_t) noexcept
{
    std::free(p);
}
