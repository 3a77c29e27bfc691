/*
 * names.c - the names of ops, backends and strategies, from the macro lists of remat.h.
 * Every module may print them; none has to reach into the module that uses the enum.
 */
#include "core/core.h"

#include <string.h>

static const char *const op_names[] = {
#define REMAT_X_NAME(e, s) s,
    REMAT_OPS(REMAT_X_NAME)
#undef REMAT_X_NAME
};
_Static_assert(REMAT_ARRAY_LEN(op_names) == REMAT_OP_COUNT, "op names");

static const char *const strategy_names[] = {
#define REMAT_X_NAME(e, s) s,
    REMAT_STRATEGIES(REMAT_X_NAME)
#undef REMAT_X_NAME
};
_Static_assert(REMAT_ARRAY_LEN(strategy_names) == REMAT_STRATEGY_COUNT, "strategy names");

static const char *const backend_names[] = {"ref", "cpu", "cuda"};
_Static_assert(REMAT_ARRAY_LEN(backend_names) == REMAT_BACKEND_COUNT, "backend names");

const char *remat_op_name(remat_op op)
{
    return (unsigned)op < REMAT_OP_COUNT ? op_names[op] : "unknown";
}

const char *remat_strategy_name(remat_strategy s)
{
    return (unsigned)s < REMAT_STRATEGY_COUNT ? strategy_names[s] : "unknown";
}

remat_strategy remat_strategy_from_name(const char *name)
{
    for (int i = 0; name && i < REMAT_STRATEGY_COUNT; i++)
        if (!strcmp(name, strategy_names[i]))
            return (remat_strategy)i;
    return REMAT_STRATEGY_COUNT;
}

const char *remat_backend_name(remat_backend_kind b)
{
    return (unsigned)b < REMAT_BACKEND_COUNT ? backend_names[b] : "unknown";
}
