/*
 * rss.c - the process's resident set and its high-water mark, from /proc/self/status
 * (Linux; every function answers 0 or false elsewhere). See rss.h for the fallback
 * when the high-water mark cannot be reset.
 */
#include "core/rss.h"

#include <stdio.h>
#include <string.h>

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

size_t rss_file_bytes(void)
{
    return status_kb("RssFile");
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
    m->file_bytes = rss_file_bytes();
}

size_t rss_mark_peak(const struct rss_mark *m, size_t sampled_bytes)
{
    size_t hwm = rss_peak_bytes(), now;

    if (m->reset || hwm > m->hwm_bytes)
        return hwm;
    now = rss_current_bytes();
    return sampled_bytes > now ? sampled_bytes : now;
}
