/*
 * blocks.c - the trainer's blocks in host memory: the host tier's region (anonymous
 * pages, or mapped from a file), and how much of the blocks is resident, read from the
 * page tables.
 */
#include "exec/exec.h"

#include "core/rss.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

/* The host tier's region: mapped from the file when one is given. */
remat_status trainer_host_tier(remat_trainer *t)
{
    size_t n = t->lay.host_bytes;
    int fd;

    if (!n)
        return REMAT_OK;
    if (!t->o.host_file && t->be->alloc_pinned) {
        t->host = t->be->alloc_pinned(t->ctx, n);
        if (!t->host)
            return REMAT_FAIL(REMAT_ERR_NOMEM, "cannot allocate the %zu-byte pinned host tier", n);
        return REMAT_OK;
    }
    if (!t->o.host_file) {
        t->host = core_pages_alloc(n);
        if (!t->host)
            return REMAT_FAIL(REMAT_ERR_NOMEM, "cannot allocate the %zu-byte host tier", n);
        return REMAT_OK;
    }
    fd = open(t->o.host_file, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return REMAT_FAIL(REMAT_ERR_IO, "cannot open the host-tier file '%s'", t->o.host_file);
    if (ftruncate(fd, (off_t)n)) {
        close(fd);
        return REMAT_FAIL(REMAT_ERR_IO, "cannot size the host-tier file '%s' to %zu bytes",
                          t->o.host_file, n);
    }
    t->host = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (t->host == MAP_FAILED) {
        t->host = NULL;
        return REMAT_FAIL(REMAT_ERR_IO, "cannot map the host-tier file '%s'", t->o.host_file);
    }
    t->host_mapped = true;
    return REMAT_OK;
}

/* The resident pages of t's blocks in host memory: the arena and the resident block
 * (on cuda, on the device: not counted) and the host tier. */
size_t trainer_blocks_resident(const remat_trainer *t)
{
    size_t n = rss_resident_in(t->host, t->lay.host_bytes);

    if (t->o.backend != REMAT_BACKEND_CUDA) {
        n += rss_resident_in(t->arena, t->lay.arena_bytes);
        n += rss_resident_in(t->block, t->block_floats * sizeof(float));
    }
    return n;
}
