/*
 * rates.c - the time model's rates for a command that plans for a backend: what the
 * user gave (--flops, --bandwidth), the rest measured for the backend on this machine
 * (remat_calibrate: cached after the first time; REMAT_CALIBRATE=0 keeps the defaults).
 */
#include "cli/cli.h"

int cli_time_model(const remat_train_opts *to, remat_plan_opts *po)
{
    double flops, bandwidth, slowdown;
    remat_status st = remat_calibrate(to, &flops, &bandwidth, &slowdown);

    if (st)
        return cli_error_code(cli_exit_code(st), NULL, "measuring the %s backend's rates: %s",
                              remat_backend_name(to->backend), remat_errmsg());
    if (po->flops <= 0)
        po->flops = flops;
    if (po->bandwidth <= 0)
        po->bandwidth = bandwidth;
    po->copy_slowdown = slowdown;
    return 0;
}
