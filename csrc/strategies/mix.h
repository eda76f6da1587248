/*
 * mix.h - the 64-bit mixer the strategies derive scores and permutations
 * from (rendezvous.h, maglev.h).  Plain C11, no state.
 */
#ifndef CHASH_MIX_H
#define CHASH_MIX_H

#include <stdint.h>

/*
 * MurmurHash3's 64-bit finaliser (fmix64): a bijection on 64-bit values in
 * which every input bit affects every output bit.  Used to derive scores and
 * permutations from hashes that are already uniform but related to each
 * other (a key hash XOR a node hash).
 */
uint64_t chash_mix64(uint64_t x);

#endif /* CHASH_MIX_H */
