/*
 * rss.h - the operating system's view of the process's memory (Linux): its resident set
 * (VmRSS) and the high-water mark of it (VmHWM), read from /proc/self/status, and the
 * resident set's code and data parts, read exactly from the page tables
 * (/proc/self/smaps: rss_split below).
 *
 * The high-water mark is reset by writing "5" to /proc/self/clear_refs (Linux 4.0 and
 * later; a sandbox or an older kernel may refuse it). Where the reset fails, a mark falls
 * back on what can still be known: the high-water mark when it rose after the mark was
 * taken (then it is the peak since the mark exactly), otherwise the largest of the
 * resident sets sampled by the caller and the current one, which misses any peak that
 * came and went between samples (a lower bound of the true peak).
 *
 * Each read of status opens and parses one small file (tens of microseconds), of smaps a
 * line group per mapping (about a millisecond): not for inner loops.
 * The kernel keeps its resident counters per CPU and folds them in lazily, so a read can
 * lag the truth by a few hundred KiB.
 */
#ifndef REMAT_RSS_H
#define REMAT_RSS_H

#include <stdbool.h>
#include <stddef.h>

/* The resident set now (VmRSS), in bytes; 0 where unavailable. */
size_t rss_current_bytes(void);
/* The resident set in two parts, from the page tables (/proc/self/smaps: exact, unlike
 * the counters of /proc/self/status): code and constants, the resident pages of every
 * mapping that is executable or not writable (the program's and its libraries' code and
 * read-only data, read from disk the first time they run, and kernels compiled at run
 * time, oneDNN's JIT code), which nobody allocates for data; and data, every other
 * resident page (what allocations hold; a host tier mapped from a file is writable, so
 * data). Reading walks every mapping: about a millisecond, not for loops. */
struct rss_split {
    size_t code_bytes;
    size_t data_bytes;
};
/* False (and zeros) where /proc/self/smaps cannot be read. */
bool rss_split(struct rss_split *out);
/* rss_split's code part, 0 where unavailable. */
size_t rss_code_bytes(void);
/* How many bytes of the pages of [p, p + n) are resident (mincore: whole pages, the
 * last one included); 0 where the range is not mapped or the system cannot say. */
size_t rss_resident_in(const void *p, size_t n);
/* The resident set's high-water mark (VmHWM), in bytes; 0 where unavailable. */
size_t rss_peak_bytes(void);
/* Resets the high-water mark to the current resident set; false where the system
 * refuses (then rss_peak_bytes keeps its old, larger value). */
bool rss_reset_peak(void);

/* A point from which the peak is measured. */
struct rss_mark {
    size_t before_bytes;    /* VmRSS when the mark was taken */
    size_t hwm_bytes;       /* VmHWM just after the reset (or the failed reset) */
    struct rss_split split; /* the resident set's parts when the mark was taken */
    bool split_ok;          /* they could be read */
    bool reset;             /* the reset worked: VmHWM is the peak since the mark */
};

/* Resets the high-water mark and records the resident set. */
void rss_mark_begin(struct rss_mark *m);
/* Has the C library give the system back the free pages of its heaps (glibc's
 * malloc_trim; nothing elsewhere), so that memory freed is no longer resident. */
void rss_release_free(void);
/* Makes the C library's main heap resident for what comes next: n bytes of free heap
 * (a block written and freed) and then every page of the heap up to its end (Linux's
 * MADV_POPULATE_WRITE, which leaves the contents as they are; pages that
 * rss_release_free gave back inside free blocks come back). Small allocations that
 * come and go later (a kernel library's per-call temporaries) then find resident pages
 * instead of touching new ones. Where the system cannot, the free block alone. */
void rss_keep_heap(size_t n);
/* Resets the high-water mark again, the mark's other figures kept: memory held and given
 * back before this point no longer counts, memory still held does. */
void rss_mark_forget_peak(struct rss_mark *m);
/* The most the process held since the mark (see the file's comment): VmHWM when the
 * reset worked or the mark rose since, else the larger of sampled_bytes (the caller's
 * largest VmRSS sample, 0 if none) and VmRSS now. 0 where unavailable. */
size_t rss_mark_peak(const struct rss_mark *m, size_t sampled_bytes);
/* How much each part grew since the mark, exactly from the page tables, the data part
 * plus what the high-water mark holds above the resident set now (memory that came and
 * went: the counters' figure, so within their lag); zeros where unavailable. */
struct rss_split rss_mark_growth(const struct rss_mark *m);
/* The same without what came and went: what is resident now beyond the mark. */
struct rss_split rss_mark_held(const struct rss_mark *m);

/*
 * For processes that plan and do not train (remat plan, compare, depth, report; the
 * planners' benchmark): freed memory stays in the heap for the next allocation instead
 * of going back to the system. Planning allocates and frees arrays of megabytes hundreds
 * of times (each DP run's frontiers, each attempt's packer); glibc serves blocks above
 * its mmap threshold with fresh mappings and gives freed heap tops back, so each was
 * paged in again (ResNet-2498's hybrid plan: 0.17 s of 1.03 s in page faults). Not for
 * training, whose measurement of the process's memory wants what planning freed given
 * back (rss_release_free). Process-wide; nothing where the C library is not glibc.
 */
void rss_keep_freed(void);

#endif
