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

#ifdef REMAT_MPI
#include <mpi.h>

static bool fits_int(size_t n)
{
    return n <= (size_t)INT_MAX;
}

static remat_status mpi_exchange(void *ud, const float *send, size_t stride, float *recv,
                                 size_t n)
{
    struct cli_dist *d = ud;
    int size = d->comm.size, counts[64], sdispl[64], rdispl[64], *c = counts, *sd = sdispl,
        *rd = rdispl;
    remat_status st = REMAT_OK;

    if (!fits_int(stride * (size_t)size) || !fits_int(n * (size_t)size))
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "a shard of %zu floats is past MPI's int "
                          "counts; use more ranks", stride);
    if (size > 64) {
        c = malloc(sizeof *c * (size_t)size);
        sd = malloc(sizeof *sd * (size_t)size);
        rd = malloc(sizeof *rd * (size_t)size);
    }
    if (!c || !sd || !rd) {
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "out of memory for the exchange");
        goto out;
    }
    for (int i = 0; i < size; i++) {
        c[i] = (int)n;
        sd[i] = (int)(stride * (size_t)i);
        rd[i] = (int)(n * (size_t)i);
    }
    if (MPI_Alltoallv(send, c, sd, MPI_FLOAT, recv, c, rd, MPI_FLOAT, MPI_COMM_WORLD))
        st = REMAT_FAIL(REMAT_ERR_IO, "MPI_Alltoallv failed");
out:
    if (size > 64) {
        free(c);
        free(sd);
        free(rd);
    }
    return st;
}

static remat_status mpi_gather(void *ud, float *data, size_t n)
{
    if (!fits_int(n))
        return REMAT_FAIL(REMAT_ERR_UNSUPPORTED, "a shard of %zu floats is past MPI's int "
                          "counts; use more ranks", n);
    if (MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, (int)n, MPI_FLOAT,
                      MPI_COMM_WORLD))
        return REMAT_FAIL(REMAT_ERR_IO, "MPI_Allgather failed");
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

int dist_begin(struct cli_dist *d)
{
    int rank = 0, size = 1;

    memset(d, 0, sizeof *d);
    d->comm = (remat_comm){.rank = 0, .size = 1, .ud = d, .exchange = mpi_exchange,
                           .gather = mpi_gather, .agree = mpi_agree};
    if (!dist_launched())
        return 0;
    if (MPI_Init(NULL, NULL))
        return cli_error_code(CLI_EXIT_FAILED, NULL, "MPI_Init failed");
    d->started = true;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    d->comm.rank = rank;
    d->comm.size = size;
    return 0;
}

void dist_end(struct cli_dist *d)
{
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
