/*
 * data.c - the data file of remat train --data: a header and then every image and
 * label, read whole into memory after checking that the header's sizes match the
 * file's size (so a hostile header cannot ask for an unbounded allocation).
 */
#include "core/core.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

struct remat_data {
    int64_t count, c, h, w;
    float *x;
    int32_t *y;
};

remat_status remat_data_open(const char *path, remat_data **out)
{
    struct stat sb;
    remat_data *d = NULL;
    char magic[8];
    int64_t hdr[4], sample;
    size_t want;
    FILE *f;
    remat_status st = REMAT_OK;

    *out = NULL;
    f = fopen(path, "rb");
    if (!f)
        return REMAT_FAIL(REMAT_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    if (!fstat(fileno(f), &sb) && (S_ISDIR(sb.st_mode) || (S_ISREG(sb.st_mode) && !sb.st_size))) {
        st = REMAT_FAIL(REMAT_ERR_IO, "%s: %s", path,
                        S_ISDIR(sb.st_mode) ? "is a directory" : "empty file");
        goto out;
    }
    if (fstat(fileno(f), &sb) || fread(magic, 1, 8, f) != 8 || memcmp(magic, "REMATDAT", 8) ||
        fread(hdr, 8, 4, f) != 4) {
        st = REMAT_FAIL(REMAT_ERR_PARSE, "%s: not a remat data file (see docs/formats.md)", path);
        goto out;
    }
    for (int i = 0; i < 4; i++)
        if (hdr[i] <= 0 || hdr[i] > ((int64_t)1 << 31)) {
            st = REMAT_FAIL(REMAT_ERR_PARSE, "%s: header field %d is %lld", path, i,
                            (long long)hdr[i]);
            goto out;
        }
    if (!core_mul_i64(hdr[1], hdr[2], &sample) || !core_mul_i64(sample, hdr[3], &sample) ||
        !core_mul_i64(sample + 1, hdr[0], &sample) ||
        !core_mul_size((size_t)sample, 4, &want) || want + 40 != (size_t)sb.st_size) {
        st = REMAT_FAIL(REMAT_ERR_PARSE, "%s: the header says %lld samples of %lldx%lldx%lld, "
                        "which is not the file's size of %lld bytes", path, (long long)hdr[0],
                        (long long)hdr[1], (long long)hdr[2], (long long)hdr[3],
                        (long long)sb.st_size);
        goto out;
    }
    d = calloc(1, sizeof *d);
    if (!d || !(d->x = malloc(want))) {
        st = REMAT_FAIL(REMAT_ERR_NOMEM, "%s: out of memory for %zu bytes", path, want);
        goto out;
    }
    d->count = hdr[0];
    d->c = hdr[1];
    d->h = hdr[2];
    d->w = hdr[3];
    d->y = (int32_t *)(d->x + (size_t)(d->count * d->c * d->h * d->w));
    if (fread(d->x, 1, want, f) != want) {
        st = REMAT_FAIL(REMAT_ERR_IO, "%s: read error", path);
        goto out;
    }
    *out = d;
    d = NULL;
out:
    remat_data_free(d);
    fclose(f);
    return st;
}

void remat_data_free(remat_data *d)
{
    if (!d)
        return;
    free(d->x);
    free(d);
}

int64_t remat_data_count(const remat_data *d)
{
    return d->count;
}

void remat_data_sample_shape(const remat_data *d, int64_t chw[3])
{
    chw[0] = d->c;
    chw[1] = d->h;
    chw[2] = d->w;
}

void remat_data_batch(const remat_data *d, int64_t first, int64_t n, float *x, int32_t *labels)
{
    size_t sample = (size_t)(d->c * d->h * d->w);

    for (int64_t i = 0; i < n; i++) {
        int64_t k = (first + i) % d->count;

        memcpy(x + (size_t)i * sample, d->x + (size_t)k * sample, sizeof(float) * sample);
        labels[i] = d->y[k];
    }
}
