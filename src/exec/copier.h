/*
 * copier.h - a copy thread: copies queued in order and done in the background, so that
 * the executor's OFFLOAD and PREFETCH steps overlap compute (the CPU backend's side of
 * the host tier; the CUDA backend uses a copy stream instead).
 */
#ifndef REMAT_COPIER_H
#define REMAT_COPIER_H

#include "core/core.h"

struct copier;

remat_status copier_new(const remat_allocator *a, struct copier **out);
/* Joins the thread after the queued copies are done. */
void copier_free(struct copier *c);
/* Queues a copy of n bytes; returns its ticket (tickets grow by one per copy). Blocks
 * only when the queue is full. */
uint64_t copier_start(struct copier *c, void *dst, const void *src, size_t n);
/* Blocks until the copy with this ticket (and every one before it) is done. */
void copier_wait(struct copier *c, uint64_t ticket);
/* Seconds the thread has spent copying. */
double copier_seconds(struct copier *c);

#endif
