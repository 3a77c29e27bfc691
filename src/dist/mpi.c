/*
 * mpi.c - dist.h over MPI (Open MPI, MPICH): MPI_COMM_WORLD, byte moves only. The
 * trainer's gradient sums happen in the library in rank order (exec/dist.c), never in
 * an MPI reduction, whose order of float additions the implementation chooses; the
 * command's own sums (losses) are gathered and added in rank order here. Errors are
 * fatal (MPI_ERRORS_ARE_FATAL): MPI stops every rank with a message naming the rank, so
 * a broken link never hangs a rank. Without REMAT_MPI (no mpi.h at build time) a
 * process started by a launcher is refused.
 */
#include "dist/dist.h"
#include "core/core.h"
#include "cli/cli.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

bool dist_launched(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"};

    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i]))
            return true;
    return false;
}

bool dist_parse_bucket(const char *opt, const char *s, remat_tgraph_opts *o)
{
    size_t b;

    if (!cli_parse_bytes(opt, s, &b))
        return false;
    if (b < 4) {
        cli_error("a bucket holds at least one float: 4 bytes", "%s: %zu bytes", opt, b);
        return false;
    }
    o->bucket_bytes = b;
    return true;
}

#ifdef REMAT_MPI
#include <mpi.h>

static bool fits_int(size_t n)
{
    return n <= (size_t)INT_MAX;
}

/* The reduction's transfers (remat_comm's exchange, gather and test): exchanges on one
 * duplicate of MPI_COMM_WORLD and gathers on another, so that each kind keeps its own
 * order whatever way a rank interleaves them; req names an entry of a table that grows
 * as needed (MPI reads the count and displacement arrays until the transfer is done). */
struct mpi_reqs {
    MPI_Comm xcomm, gcomm;
    struct mpi_req {
        MPI_Request r;
        int *ints;     /* 4 per rank: counts, displacements (send, receive) */
        bool used;
    } *e;
    int32_t n;
};

/* A free entry of the table (*req its index), its ints ready; NULL when out of memory. */
static struct mpi_req *take_req(struct cli_dist *d, int32_t *req)
{
    struct mpi_reqs *m = d->mpi;
    struct mpi_req *e;
    int32_t i = 0;

    while (i < m->n && m->e[i].used)
        i++;
    if (i == m->n) {
        int32_t n = m->n ? 2 * m->n : 8;

        if (!(e = realloc(m->e, sizeof *e * (size_t)n)))
            return NULL;
        memset(e + m->n, 0, sizeof *e * (size_t)(n - m->n));
        m->e = e;
        m->n = n;
    }
    e = &m->e[i];
    if (!e->ints && !(e->ints = malloc(sizeof *e->ints * 4 * (size_t)d->comm.size)))
        return NULL;
    e->used = true;
    *req = i;
    return e;
}

/* counts and displacements (relative to the least displacement with a count, *base)
 * into ints; false when one is past MPI's int counts. */
static bool to_ints(int size, const size_t *counts, const size_t *displ, int *c, int *dp,
                    size_t *base)
{
    *base = SIZE_MAX;
    for (int i = 0; i < size; i++)
        if (counts[i] && displ[i] < *base)
            *base = displ[i];
    if (*base == SIZE_MAX)
        *base = 0;
    for (int i = 0; i < size; i++) {
        size_t off = counts[i] ? displ[i] - *base : 0;

        if (!fits_int(counts[i]) || !fits_int(off))
            return false;
        c[i] = (int)counts[i];
        dp[i] = (int)off;
    }
    return true;
}

static remat_status mpi_exchange(void *ud, const float *send, const size_t *counts,
                                 const size_t *sdispl, float *recv, const size_t *rcounts,
                                 const size_t *rdispl, int32_t *req)
{
    struct cli_dist *d = ud;
    int n = d->comm.size;
    struct mpi_req *e = take_req(d, req);
    size_t sb, rb;

    if (!e)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory for a transfer");
    if (!to_ints(n, counts, sdispl, e->ints, e->ints + n, &sb) ||
        !to_ints(n, rcounts, rdispl, e->ints + 2 * n, e->ints + 3 * n, &rb)) {
        e->used = false;
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "a bucket is past MPI's int counts; give "
                          "a smaller --bucket");
    }
    if (MPI_Ialltoallv(send + sb, e->ints, e->ints + n, MPI_FLOAT, recv + rb, e->ints + 2 * n,
                       e->ints + 3 * n, MPI_FLOAT, d->mpi->xcomm, &e->r))
        return REMAT_FAIL(REMAT_ERR_IO, "MPI_Ialltoallv failed");
    return REMAT_OK;
}

static remat_status mpi_gather(void *ud, float *data, const size_t *counts,
                               const size_t *displ, int32_t *req)
{
    struct cli_dist *d = ud;
    int n = d->comm.size;
    struct mpi_req *e = take_req(d, req);
    size_t b;

    if (!e)
        return REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory for a transfer");
    if (!to_ints(n, counts, displ, e->ints, e->ints + n, &b)) {
        e->used = false;
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "a shard is past MPI's int counts; use "
                          "more ranks");
    }
    if (MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data + b, e->ints, e->ints + n,
                        MPI_FLOAT, d->mpi->gcomm, &e->r))
        return REMAT_FAIL(REMAT_ERR_IO, "MPI_Iallgatherv failed");
    return REMAT_OK;
}

static remat_status mpi_test(void *ud, int32_t req, bool wait, bool *done)
{
    struct cli_dist *d = ud;
    struct mpi_req *e = &d->mpi->e[req];
    int flag = 1;

    if (wait ? MPI_Wait(&e->r, MPI_STATUS_IGNORE)
             : MPI_Test(&e->r, &flag, MPI_STATUS_IGNORE))
        return REMAT_FAIL(REMAT_ERR_IO, "MPI_Test failed");
    *done = flag != 0;
    if (*done)
        e->used = false;
    return REMAT_OK;
}

/* Each rank's (status, rank) pair; the lowest failing rank wins (MPI_MINLOC on ints:
 * exact, whatever the order). */
static remat_status mpi_agree(void *ud, remat_status st, int32_t *failed,
                              remat_status *failed_st)
{
    struct cli_dist *d = ud;
    struct {
        int rank, st; /* rank INT_MAX: did not fail */
    } in = {st ? d->comm.rank : INT_MAX, (int)st}, out;

    if (MPI_Allreduce(&in, &out, 1, MPI_2INT, MPI_MINLOC, MPI_COMM_WORLD))
        return REMAT_FAIL(REMAT_ERR_IO, "MPI_Allreduce failed");
    *failed = out.rank == INT_MAX ? -1 : out.rank;
    *failed_st = (remat_status)out.st;
    return REMAT_OK;
}

/*
 * Open MPI's shared-memory transport keeps its fragments in segments under /dev/shm and
 * touches their pages as the fragments are first used, so a trainer's first steps grew
 * by a few of them beside its blocks (12 KiB on two ranks, past the budget the plan
 * printed). Before any trainer exists, traffic like the reduction's makes them resident:
 * all-to-alls and in-place all-gathers of 1 to WARM_FLOATS floats a peer (from the
 * eager fragments to the single-copy protocol), WARM_DEPTH of each kind under way at
 * once, twice over. Its buffers are freed again before the trainer's mark. Hundreds of
 * buckets under way at once (--bucket 64KB on ResNet-18: 741) still grow the heap by
 * tens of KB during the first step (the request table below and Open MPI's schedules
 * of its nonblocking collectives), beside the blocks.
 */
#define WARM_DEPTH 16
#define WARM_FLOATS 16384

static void warm_up(struct cli_dist *d)
{
    static const int sizes[] = {1, 64, 1024, WARM_FLOATS};
    /* at most 2^16 floats a buffer (48 of them: 12 MiB, freed before any trainer) */
    int n = d->comm.size, per = WARM_FLOATS > (1 << 16) / n ? (1 << 16) / n : WARM_FLOATS;
    size_t slab = (size_t)per * (size_t)n;
    float *buf = calloc(3 * WARM_DEPTH * slab, sizeof *buf);
    int *ints = malloc(sizeof *ints * 2 * (size_t)n);
    MPI_Request r[2 * WARM_DEPTH];

    if (!buf || !ints || per < 1)
        goto out;
    for (int round = 0; round < 2; round++)
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            int c = sizes[k] < per ? sizes[k] : per;

            for (int i = 0; i < n; i++) {
                ints[i] = c;
                ints[n + i] = i * c;
            }
            for (int q = 0; q < WARM_DEPTH; q++) {
                float *x = buf + (size_t)q * 3 * slab;

                MPI_Ialltoallv(x, ints, ints + n, MPI_FLOAT, x + slab, ints, ints + n,
                               MPI_FLOAT, d->mpi->xcomm, &r[2 * q]);
                MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x + 2 * slab, ints,
                                ints + n, MPI_FLOAT, d->mpi->gcomm, &r[2 * q + 1]);
            }
            MPI_Waitall(2 * WARM_DEPTH, r, MPI_STATUSES_IGNORE);
        }
out:
    free(ints);
    free(buf);
}

int dist_begin(struct cli_dist *d)
{
    int rank = 0, size = 1;

    memset(d, 0, sizeof *d);
    d->comm = (remat_comm){.rank = 0, .size = 1, .ud = d, .exchange = mpi_exchange,
                           .gather = mpi_gather, .test = mpi_test, .agree = mpi_agree};
    if (!dist_launched())
        return 0;
    if (MPI_Init(NULL, NULL))
        return cli_error_code(CLI_EXIT_FAILED, NULL, "MPI_Init failed");
    d->started = true;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    d->comm.rank = rank;
    d->comm.size = size;
    if (!(d->mpi = calloc(1, sizeof *d->mpi)))
        return cli_error_code(CLI_EXIT_FAILED, NULL, "out of memory");
    MPI_Comm_dup(MPI_COMM_WORLD, &d->mpi->xcomm);
    MPI_Comm_dup(MPI_COMM_WORLD, &d->mpi->gcomm);
    if (size > 1)
        warm_up(d);
    return 0;
}

void dist_end(struct cli_dist *d)
{
    if (d->mpi) {
        MPI_Comm_free(&d->mpi->xcomm);
        MPI_Comm_free(&d->mpi->gcomm);
        for (int32_t i = 0; i < d->mpi->n; i++)
            free(d->mpi->e[i].ints);
        free(d->mpi->e);
        free(d->mpi);
        d->mpi = NULL;
    }
    if (d->started)
        MPI_Finalize();
    d->started = false;
}

int dist_agree_rc(struct cli_dist *d, int rc, int *their)
{
    int32_t failed = -1;
    remat_status st = REMAT_OK;

    *their = 0;
    if (d->comm.size < 2)
        return rc ? 0 : -1;
    mpi_agree(d, (remat_status)rc, &failed, &st);
    *their = (int)st;
    return failed;
}

double dist_sum(struct cli_dist *d, double v)
{
    double all[256], *a = all, s = 0;
    int n = d->comm.size;

    if (n < 2)
        return v;
    if (n > 256 && !(a = malloc(sizeof *a * (size_t)n)))
        return v;
    MPI_Allgather(&v, 1, MPI_DOUBLE, a, 1, MPI_DOUBLE, MPI_COMM_WORLD);
    for (int i = 0; i < n; i++)
        s += a[i];
    if (a != all)
        free(a);
    return s;
}

void dist_gather_u64(struct cli_dist *d, uint64_t v, uint64_t *out)
{
    if (d->comm.size < 2) {
        out[0] = v;
        return;
    }
    MPI_Allgather(&v, 1, MPI_UINT64_T, out, 1, MPI_UINT64_T, MPI_COMM_WORLD);
}

void dist_abort(struct cli_dist *d, int rc)
{
    if (d->started)
        MPI_Abort(MPI_COMM_WORLD, rc);
}

#else /* built without MPI */

int dist_begin(struct cli_dist *d)
{
    memset(d, 0, sizeof *d);
    d->comm = (remat_comm){.rank = 0, .size = 1, .ud = d};
    if (!dist_launched())
        return 0;
    return cli_error("install Open MPI (libopenmpi-dev) and build again", "an MPI launcher "
                     "started this remat, which was built without MPI (no mpi.h)");
}

void dist_end(struct cli_dist *d)
{
    (void)d;
}

int dist_agree_rc(struct cli_dist *d, int rc, int *their)
{
    *their = 0;
    return rc ? 0 : -1;
}

double dist_sum(struct cli_dist *d, double v)
{
    return v;
}

void dist_gather_u64(struct cli_dist *d, uint64_t v, uint64_t *out)
{
    out[0] = v;
}

void dist_abort(struct cli_dist *d, int rc)
{
    (void)d;
    (void)rc;
}
#endif
