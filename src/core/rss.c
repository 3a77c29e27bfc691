/*
 * rss.c - the process's resident set and its high-water mark, from /proc/self/status,
 * and its code and data parts from /proc/self/smaps (Linux; every function answers 0 or
 * false elsewhere). See rss.h for the fallback when the high-water mark cannot be reset.
 */
#include "core/rss.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

/* The value of the "<key>:  N kB" line of /proc/self/status, in bytes; 0 when the file
 * or the line is missing or malformed. */
static size_t status_kb(const char *key)
{
    char line[256];
    size_t klen = strlen(key), bytes = 0;
    FILE *f = fopen("/proc/self/status", "r");

    if (!f)
        return 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long long kb;

        if (strncmp(line, key, klen) || line[klen] != ':')
            continue;
        if (sscanf(line + klen + 1, "%llu kB", &kb) == 1)
            bytes = (size_t)kb * 1024;
        break;
    }
    fclose(f);
    return bytes;
}

size_t rss_current_bytes(void)
{
    return status_kb("VmRSS");
}

/* Whether a mapping's permissions ("rwxp") make it code or read-only data: executable, or
 * not writable. */
static bool code_perms(const char *perms)
{
    return perms[2] == 'x' || perms[1] != 'w';
}

bool rss_split(struct rss_split *out)
{
    char line[512], perms[8];
    bool code = false;
    FILE *f = fopen("/proc/self/smaps", "r");

    out->code_bytes = out->data_bytes = 0;
    if (!f)
        return false;
    while (fgets(line, sizeof line, f)) {
        unsigned long long kb;

        /* A mapping's first line: "start-end perms offset dev inode [path]". */
        if (sscanf(line, "%*x-%*x %7s", perms) == 1 && strlen(perms) == 4)
            code = code_perms(perms);
        else if (sscanf(line, "Rss: %llu kB", &kb) == 1)
            *(code ? &out->code_bytes : &out->data_bytes) += (size_t)kb * 1024;
        /* a long path may leave the rest of its line for the next fgets: it has no
         * "Rss:" at its start and no "start-end perms" shape, so it is skipped */
    }
    fclose(f);
    return out->code_bytes + out->data_bytes > 0;
}

size_t rss_code_bytes(void)
{
    struct rss_split sp;

    return rss_split(&sp) ? sp.code_bytes : 0;
}

struct rss_split rss_mark_held(const struct rss_mark *m)
{
    struct rss_split now, g = {0, 0};

    if (!m->split_ok || !rss_split(&now))
        return g;
    g.code_bytes = now.code_bytes > m->split.code_bytes ? now.code_bytes - m->split.code_bytes
                                                        : 0;
    g.data_bytes = now.data_bytes > m->split.data_bytes ? now.data_bytes - m->split.data_bytes
                                                        : 0;
    return g;
}

struct rss_split rss_mark_growth(const struct rss_mark *m)
{
    struct rss_split g = rss_mark_held(m);
    size_t hwm, cur;

    if (!g.code_bytes && !g.data_bytes)
        return g;
    /* what came and went: the high-water mark above the resident set now */
    hwm = rss_peak_bytes();
    cur = rss_current_bytes();
    if ((m->reset || hwm > m->hwm_bytes) && hwm > cur)
        g.data_bytes += hwm - cur;
    return g;
}

size_t rss_resident_in(const void *p, size_t n)
{
    long ps = sysconf(_SC_PAGESIZE);
    size_t page = ps > 0 ? (size_t)ps : 4096, got = 0;
    unsigned char vec[1024]; /* a chunk of pages at a time: nothing allocated here */
    uintptr_t at, hi;

    if (!p || !n)
        return 0;
    at = (uintptr_t)p & ~(uintptr_t)(page - 1);
    hi = ((uintptr_t)p + n + page - 1) & ~(uintptr_t)(page - 1);
    while (at < hi) {
        size_t len = hi - at < sizeof vec * page ? hi - at : sizeof vec * page;

        if (mincore((void *)at, len, vec))
            return 0;
        for (size_t i = 0; i < len / page; i++)
            got += (vec[i] & 1) ? page : 0;
        at += len;
    }
    return got;
}

size_t rss_peak_bytes(void)
{
    return status_kb("VmHWM");
}

bool rss_reset_peak(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    bool ok;

    if (!f)
        return false;
    ok = fputs("5", f) >= 0;
    ok = fclose(f) == 0 && ok; /* the write reaches the kernel at the flush */
    return ok;
}

void rss_mark_begin(struct rss_mark *m)
{
    m->reset = rss_reset_peak();
    m->hwm_bytes = rss_peak_bytes();
    m->before_bytes = rss_current_bytes();
    m->split_ok = rss_split(&m->split);
}

void rss_keep_freed(void)
{
#if defined(__GLIBC__)
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    mallopt(M_TOP_PAD, 64 << 20);
#endif
}

void rss_release_free(void)
{
#if defined(__GLIBC__)
    malloc_trim(0);
#endif
}

/* The main heap's range from /proc/self/maps; false where there is none. */
static bool heap_range(uintptr_t *lo, uintptr_t *hi)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    bool found = false;

    if (!f)
        return false;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long a, b;

        if (strstr(line, "[heap]") && sscanf(line, "%lx-%lx", &a, &b) == 2) {
            *lo = (uintptr_t)a;
            *hi = (uintptr_t)b;
            found = true;
        }
    }
    fclose(f);
    return found;
}

void rss_keep_heap(size_t n)
{
    char *p = malloc(n);
    uintptr_t lo, hi;

    if (p) {
        memset(p, 0, n);
        __asm__ volatile("" : : "r"(p) : "memory"); /* the writes happen: nothing elides them */
        free(p);
    }
#if defined(MADV_POPULATE_WRITE)
    if (heap_range(&lo, &hi) && hi > lo)
        (void)madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE);
#else
    (void)lo;
    (void)hi;
    (void)heap_range;
#endif
}

void rss_mark_forget_peak(struct rss_mark *m)
{
    m->reset = rss_reset_peak();
    m->hwm_bytes = rss_peak_bytes();
}

size_t rss_mark_peak(const struct rss_mark *m, size_t sampled_bytes)
{
    size_t hwm = rss_peak_bytes(), now;

    if (m->reset || hwm > m->hwm_bytes)
        return hwm;
    now = rss_current_bytes();
    return sampled_bytes > now ? sampled_bytes : now;
}
