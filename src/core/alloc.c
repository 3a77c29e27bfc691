/*
 * alloc.c - every allocation of the library goes through a remat_allocator so that
 * tests can fail the N-th one; growable arrays on top.
 */
#include "core.h"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void *core_realloc(const remat_allocator *a, void *p, size_t old, size_t n)
{
    if (a && a->fn)
        return a->fn(a->ud, p, old, n);
    if (n == 0) {
        free(p);
        return NULL;
    }
    return realloc(p, n);
}

void *core_alloc(const remat_allocator *a, size_t n)
{
    return core_realloc(a, NULL, 0, n ? n : 1);
}

void *core_calloc(const remat_allocator *a, size_t n, size_t size)
{
    size_t bytes;
    void *p;

    if (!core_mul_size(n, size, &bytes))
        return NULL;
    p = core_alloc(a, bytes);
    if (p)
        memset(p, 0, bytes ? bytes : 1);
    return p;
}

void core_free(const remat_allocator *a, void *p, size_t n)
{
    if (p)
        core_realloc(a, p, n ? n : 1, 0);
}

char *core_strdup(const remat_allocator *a, const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = core_alloc(a, n);

    if (d)
        memcpy(d, s, n);
    return d;
}

void core_strfree(const remat_allocator *a, char *s)
{
    if (s)
        core_free(a, s, strlen(s) + 1);
}

void vec_init(vec *v, size_t item, const remat_allocator *al)
{
    v->data = NULL;
    v->n = v->cap = 0;
    v->item = item;
    v->al = al;
}

void vec_fini(vec *v)
{
    core_free(v->al, v->data, v->cap * v->item);
    v->data = NULL;
    v->n = v->cap = 0;
}

bool vec_reserve(vec *v, size_t n)
{
    size_t cap, bytes;
    void *d;

    if (n <= v->cap)
        return true;
    cap = v->cap ? v->cap : 8;
    while (cap < n)
        cap *= 2;
    if (!core_mul_size(cap, v->item, &bytes))
        return false;
    d = core_realloc(v->al, v->data, v->cap * v->item, bytes);
    if (!d)
        return false;
    v->data = d;
    v->cap = cap;
    return true;
}

void *vec_push(vec *v)
{
    char *slot;

    if (!vec_reserve(v, v->n + 1))
        return NULL;
    slot = (char *)v->data + v->n * v->item;
    memset(slot, 0, v->item);
    v->n++;
    return slot;
}

/* The page size, asked once (4096 where the system will not say). */
static size_t page_bytes(void)
{
    static size_t page;

    if (!page) {
        long v = sysconf(_SC_PAGESIZE);

        page = v > 0 ? (size_t)v : 4096;
    }
    return page;
}

size_t core_pages_round(size_t n)
{
    size_t page = page_bytes();

    return n > SIZE_MAX - page ? SIZE_MAX : core_align_up(n, page);
}

size_t core_pages_held(size_t n)
{
    return core_pages_round(n ? n : 1);
}

void *core_pages_alloc(size_t n)
{
    void *p;

    if (!n || n > SIZE_MAX - page_bytes())
        return NULL;
    p = mmap(NULL, core_pages_round(n), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
             -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void core_pages_free(void *p, size_t n)
{
    if (p && n)
        munmap(p, core_pages_round(n));
}

void core_hint_huge(void *p, size_t n)
{
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = (uintptr_t)2 << 20;
    uintptr_t lo = ((uintptr_t)p + huge - 1) & ~(huge - 1);
    uintptr_t hi = ((uintptr_t)p + n) & ~(huge - 1);

    if (p && n >= 4 * huge && hi > lo)
        (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
    (void)p;
    (void)n;
#endif
}
