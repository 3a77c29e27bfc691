/*
 * bitset.h - fixed-width bitsets as arrays of uint64_t words, for lower sets.
 */
#ifndef REMAT_BITSET_H
#define REMAT_BITSET_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

static inline int bits_words(int32_t n)
{
    return (n + 63) / 64;
}
static inline bool bits_has(const uint64_t *b, int32_t i)
{
    return (b[i >> 6] >> (i & 63)) & 1;
}
static inline void bits_set(uint64_t *b, int32_t i)
{
    b[i >> 6] |= (uint64_t)1 << (i & 63);
}
static inline void bits_clear(uint64_t *b, int32_t i)
{
    b[i >> 6] &= ~((uint64_t)1 << (i & 63));
}
/* a ⊆ b */
static inline bool bits_subset(const uint64_t *a, const uint64_t *b, int w)
{
    for (int i = 0; i < w; i++)
        if (a[i] & ~b[i])
            return false;
    return true;
}
static inline int32_t bits_count(const uint64_t *b, int w)
{
    int32_t c = 0;

    for (int i = 0; i < w; i++)
        c += __builtin_popcountll(b[i]);
    return c;
}
static inline uint64_t bits_hash(const uint64_t *b, int w)
{
    uint64_t h = 0x9e3779b97f4a7c15ull;

    for (int i = 0; i < w; i++) {
        h ^= b[i] + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
        h *= 0xbf58476d1ce4e5b9ull;
    }
    return h ^ (h >> 31);
}

#endif
