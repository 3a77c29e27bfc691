/*
 * status.c - status names and the thread-local error message. A message says what went
 * wrong for the user; with REMAT_DEBUG=1 in the environment it also ends in the source
 * location that set it ("[onnx.c:130]").
 */
#include "core.h"

#include <stdlib.h>
#include <string.h>

static _Thread_local char errbuf[4096];

static const char *const status_names[] = {
    [REMAT_OK] = "ok",
    [REMAT_ERR_NOMEM] = "out of memory",
    [REMAT_ERR_ARG] = "bad argument",
    [REMAT_ERR_SHAPE] = "shape mismatch",
    [REMAT_ERR_PARSE] = "malformed input",
    [REMAT_ERR_IO] = "input/output error",
    [REMAT_ERR_UNSUPPORTED] = "unsupported",
    [REMAT_ERR_INFEASIBLE] = "infeasible",
    [REMAT_ERR_INVALID] = "invalid schedule",
};
_Static_assert(REMAT_ARRAY_LEN(status_names) == REMAT_STATUS_COUNT, "status names");

const char *remat_status_name(remat_status s)
{
    if ((unsigned)s >= REMAT_STATUS_COUNT)
        return "unknown status";
    return status_names[s];
}

const char *remat_errmsg(void)
{
    return errbuf;
}

void core_clear_error(void)
{
    errbuf[0] = '\0';
}

/* The source location ends a message only for developers: REMAT_DEBUG set (and not
 * "0") in the environment. */
static bool with_location(void)
{
    const char *d = getenv("REMAT_DEBUG");

    return d && *d && strcmp(d, "0");
}

remat_status core_fail(remat_status s, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    int n;
    const char *base = strrchr(file, '/');

    va_start(ap, fmt);
    n = vsnprintf(errbuf, sizeof errbuf, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof errbuf && with_location())
        snprintf(errbuf + n, sizeof errbuf - (size_t)n, " [%s:%d]", base ? base + 1 : file,
                 line);
    return s;
}
