/*
 * hash.h - the hash functions of the ring engine.
 *
 * Every function here is written from its published specification and is
 * plain C11: no Python, no allocation, no global state.  Each takes a byte
 * string (data may be NULL when len == 0) and is defined for every length.
 *
 * Multi-byte results are returned as the integer the specification defines;
 * how a result is cut to a 32-bit ring point is the layout's business
 * (engine/scheme.c), not this file's.
 */
#ifndef CHASH_HASH_H
#define CHASH_HASH_H

#include <stddef.h>
#include <stdint.h>

#define CHASH_MD5_DIGEST_SIZE 16
#define CHASH_SHA1_DIGEST_SIZE 20
#define CHASH_SHA256_DIGEST_SIZE 32
#define CHASH_MURMUR3_128_SIZE 16

/* RFC 1321.  Writes the 16-byte digest to out. */
void chash_md5(const void *data, size_t len, uint8_t out[CHASH_MD5_DIGEST_SIZE]);

/* Four MD5 digests at once (out[i] = MD5 of data[i]); several times the
 * throughput of four chash_md5 calls when every message is <= 55 bytes. */
void chash_md5_x4(const void *const data[4], const size_t len[4],
                  uint8_t out[4][CHASH_MD5_DIGEST_SIZE]);

/* Sixteen at once, as chash_md5_x4: about 2.4 times its throughput a
 * message when every message is <= 55 bytes (four chains of four lanes). */
void chash_md5_x16(const void *const data[16], const size_t len[16],
                   uint8_t out[16][CHASH_MD5_DIGEST_SIZE]);

/* FIPS 180-4 SHA-1.  Writes the 20-byte digest to out. */
void chash_sha1(const void *data, size_t len, uint8_t out[CHASH_SHA1_DIGEST_SIZE]);

/* FIPS 180-4 SHA-256.  Writes the 32-byte digest to out. */
void chash_sha256(const void *data, size_t len, uint8_t out[CHASH_SHA256_DIGEST_SIZE]);

/* MurmurHash3 x64_128.  Writes h1 then h2, each as 8 little-endian bytes
 * (mmh3.hash_bytes(data, seed); Guava's murmur3_128(seed) HashCode bytes). */
void chash_murmur3_128(const void *data, size_t len, uint32_t seed,
                       uint8_t out[CHASH_MURMUR3_128_SIZE]);

/* MurmurHash2, 32-bit (the original MurmurHash2, not 2A nor 64-bit). */
uint32_t chash_murmur2(const void *data, size_t len, uint32_t seed);

/* MurmurHash2, 64-bit, as libstdc++'s std::_Hash_bytes on 64-bit targets
 * (Envoy's MURMUR_HASH_2 is this with seed 0xc70f6907). */
uint64_t chash_murmur2_64(const void *data, size_t len, uint64_t seed);

/* MurmurHash3 x86_32, as mmh3.hash(data, seed, signed=False). */
uint32_t chash_murmur3_32(const void *data, size_t len, uint32_t seed);

/* XXH32 and XXH64 (xxHash specification). */
uint32_t chash_xxh32(const void *data, size_t len, uint32_t seed);
uint64_t chash_xxh64(const void *data, size_t len, uint64_t seed);

/* XXH3 64-bit with the default secret, as xxhash.xxh3_64_intdigest(data, seed). */
uint64_t chash_xxh3_64(const void *data, size_t len, uint64_t seed);

/* FNV-1a, 32-bit (offset basis 2166136261, prime 16777619). */
uint32_t chash_fnv1a_32(const void *data, size_t len);

/* CRC-32 (ISO-HDLC, reflected, poly 0xEDB88320), as zlib.crc32(data). */
uint32_t chash_crc32(const void *data, size_t len);

/* Bob Jenkins's one-at-a-time hash, each byte added as a signed char
 * (sign-extended to 32 bits), as libmemcached and twemproxy compute it on
 * x86, where char is signed: bytes >= 0x80 add 0xFFFFFF80 + (b - 0x80). */
uint32_t chash_one_at_a_time(const void *data, size_t len);

/* sdbm: h = c + (h << 6) + (h << 16) - h for each byte, from 0. */
uint32_t chash_sdbm(const void *data, size_t len);

/* djb2: h = h * 33 + c for each byte, from 5381. */
uint32_t chash_djb2(const void *data, size_t len);

/* wt6, Willy Tarreau's hash of HAProxy (wt6.c). */
uint32_t chash_wt6(const void *data, size_t len);

/* Bob Jenkins' full-avalanche integer hash times 3221225473 (HAProxy's
 * full_hash); a bijection of the 32-bit integers. */
uint32_t chash_full_hash(uint32_t a);

#endif /* CHASH_HASH_H */
