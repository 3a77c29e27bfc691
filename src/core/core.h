/*
 * core.h - what every module shares: error reporting, the allocator, growable arrays
 * and overflow-checked size arithmetic.
 *
 * Errors: a failing function calls core_fail(status, fmt, ...) which records a message
 * in a thread-local buffer (with the source file and line when REMAT_DEBUG=1 is in the
 * environment: users see the message alone) and returns the status, so
 * `return REMAT_FAIL(REMAT_ERR_ARG, "...")` is the usual idiom.
 */
#ifndef REMAT_CORE_H
#define REMAT_CORE_H

#include "remat.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#define REMAT_ASSERT(c)                                                                  \
    do {                                                                                 \
        if (!(c)) {                                                                      \
            fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__, __LINE__, #c);    \
            abort();                                                                     \
        }                                                                                \
    } while (0)

#define REMAT_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

remat_status core_fail(remat_status s, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define REMAT_FAIL(s, ...) core_fail((s), __FILE__, __LINE__, __VA_ARGS__)
void core_clear_error(void);

/* The allocator: a == NULL means the C library. */
void *core_alloc(const remat_allocator *a, size_t n);           /* NULL on failure */
void *core_calloc(const remat_allocator *a, size_t n, size_t size);
void *core_realloc(const remat_allocator *a, void *p, size_t old, size_t n);
void core_free(const remat_allocator *a, void *p, size_t n);
char *core_strdup(const remat_allocator *a, const char *s);
void core_strfree(const remat_allocator *a, char *s);

/*
 * Whole pages straight from the operating system (an anonymous private mapping), zeroed,
 * with no allocator's header beside them: a block of n bytes holds exactly
 * core_pages_round(n) bytes of memory once every page is touched, which is what the
 * budget counts for the arena, the resident block and the host tier. NULL on failure
 * or for 0 bytes; core_pages_free takes the size given to core_pages_alloc.
 */
void *core_pages_alloc(size_t n);
void core_pages_free(void *p, size_t n);
/* A hint that the block [p, p + n) is a large table written soon in full: the kernel is
 * asked for huge pages under its aligned interior (fewer page faults; blocks under 8 MiB,
 * or where the kernel does not offer them, are left as they are). */
void core_hint_huge(void *p, size_t n);
size_t core_pages_round(size_t n);
/* What a block of n bytes holds in whole pages once touched: core_pages_round(n), and
 * one page for 0 bytes (the backends allocate at least one). */
size_t core_pages_held(size_t n);

/* Overflow-checked arithmetic: false when the result does not fit. */
static inline bool core_mul_size(size_t a, size_t b, size_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool core_mul_i64(int64_t a, int64_t b, int64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}
static inline size_t core_align_up(size_t n, size_t align)
{
    return align <= 1 ? n : (n + align - 1) / align * align;
}

/*
 * A growable array of fixed-size items: vec_push returns a pointer to the new
 * (zeroed) slot or NULL when out of memory.
 */
typedef struct vec {
    void *data;
    size_t n, cap, item;
    const remat_allocator *al;
} vec;

void vec_init(vec *v, size_t item, const remat_allocator *al);
void vec_fini(vec *v);
void *vec_push(vec *v);
bool vec_reserve(vec *v, size_t n);
#define VEC_AT(v, T, i) (&((T *)(v)->data)[i])

/* Seconds on the monotonic clock (clock.c): for timing, not for dates. */
double core_seconds(void);

/* Runs fn(ctx, i) for i in 0 .. n-1 on up to `threads` threads, the caller's among them
 * (par.c); returns when all have run. fn must touch only what job i owns: the allocator
 * is shared, so callers pass threads > 1 only with the C library's (thread-safe) one.
 * Called inside a job, it runs the jobs on the calling thread alone (the other cores
 * are the other jobs'). */
void core_par_run(int n, int threads, void (*fn)(void *ctx, int i), void *ctx);
/* A job's failure handed to the thread that reads its results: the status and a copy of
 * the job thread's message (remat_errmsg is per thread). Zeroed: none. */
struct core_job_err {
    remat_status st;
    char *msg;
};
/* In the job: notes st in e, with this thread's message when st fails; returns st. */
remat_status core_job_err_note(struct core_job_err *e, remat_status st);
/* On the reading thread: e's failure raised again with its message (REMAT_OK when none);
 * e is cleared. */
remat_status core_job_err_raise(struct core_job_err *e);
/* e cleared without raising it. */
void core_job_err_clear(struct core_job_err *e);
/* A caller and one helper thread for many short rounds of two parts (par.c): started
 * only with at least two cores and outside core_par_run's jobs (NULL otherwise: the
 * caller runs alone). core_team_run runs fn(ctx, 1) on the helper and fn(ctx, 0) on the
 * caller, and returns when both have; a part must touch only what it owns. The team
 * allocates with the C library, and its parts must not allocate with a caller's
 * allocator (which need not be thread-safe). */
typedef struct core_team core_team;
core_team *core_team_start(void);
void core_team_run(core_team *t, void (*fn)(void *ctx, int part), void *ctx);
void core_team_stop(core_team *t); /* NULL: nothing */
/* The cores this process may run on (its affinity: taskset, mpirun's binding), at least
 * 1 and at most 8. */
int core_par_threads(void);
/* The threads core_par_run may use with allocator a: the cores with the C library's
 * (thread-safe), 1 with a caller's (which need not be). */
static inline int core_par_threads_with(const remat_allocator *a)
{
    return a && a->fn ? 1 : core_par_threads();
}

#endif
