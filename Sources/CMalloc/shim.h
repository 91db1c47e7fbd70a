// glibc's allocator controls (mallopt), for the worker's mmap threshold.
#include <malloc.h>

/// For the test suite's fault injection only (`HALCYON_TEST_FAULT=allocate:…`): allocates `size`
/// bytes and writes one byte of every page through a volatile pointer, so that the memory is
/// resident and no optimiser can remove the allocation. The block is never freed.
static inline void *hc_test_touch_allocation(size_t size) {
    volatile char *block = (volatile char *)malloc(size);
    if (block == NULL) return NULL;
    for (size_t i = 0; i < size; i += 4096) block[i] = 1;
    return (void *)block;
}
