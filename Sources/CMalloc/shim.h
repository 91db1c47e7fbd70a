// glibc's allocator controls (mallopt), for the worker's mmap threshold.
#include <malloc.h>
