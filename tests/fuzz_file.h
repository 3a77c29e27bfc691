/*
 * fuzz_file.h - a fuzz input handed to a reader that takes a path: one memory file
 * (memfd) per process, rewritten with each input, opened as /proc/self/fd/N, so that
 * nothing touches the disk.
 */
#ifndef REMAT_FUZZ_FILE_H
#define REMAT_FUZZ_FILE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* The input as a file: its path (the same memfd every time). */
static const char *as_file(const uint8_t *data, size_t n)
{
    static int fd = -1;
    static char path[64];

    if (fd < 0) {
        fd = memfd_create("fuzz_input", 0);
        if (fd < 0)
            abort();
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) || pwrite(fd, data, n, 0) != (ssize_t)n)
        abort();
    return path;
}

#endif
