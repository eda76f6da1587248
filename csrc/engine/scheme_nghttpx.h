/*
 * scheme_nghttpx.h - nghttpx 1.52's affinity points of a backend, from its
 * address as nghttpx encodes it (scheme_nghttpx.c).  A leaf below scheme.h,
 * which includes it: the nghttpx layout's points are these.
 */
#ifndef CHASH_SCHEME_NGHTTPX_H
#define CHASH_SCHEME_NGHTTPX_H

#include <stddef.h>
#include <stdint.h>

/* nghttpx's 160 points per backend. */
#define CHASH_NGHTTPX_POINTS 160

/*
 * The bytes nghttpx hashes for a backend named id: "HOST:PORT" with a
 * dotted-quad IPv4 HOST gives its struct sockaddr_in (16 bytes), "[V6]:PORT"
 * its struct sockaddr_in6 (28 bytes), as Linux lays them out on a
 * little-endian machine (family 2 or 10 in host order, the port and
 * address in network order, the rest 0); "HOST:PORT;dns" (a backend with
 * nghttpx's dns flag) gives "HOST:PORT" itself.  PORT is 0..65535 in
 * decimal.  Writes at most CHASH_NGHTTPX_KEY_MAX bytes to out (more only
 * for a ";dns" id: its length minus 4) and their count to *len.  Returns
 * 0, or CHASH_EINVAL for any other id (a host name without ";dns", a
 * malformed address or port).  out may be NULL to check an id only.
 */
#define CHASH_NGHTTPX_KEY_MAX 28
int chash_nghttpx_key(const char *id, size_t id_len, uint8_t *out, size_t *len);

/*
 * Points first .. first + count - 1 of the nghttpx backend named id:
 * point 8 * d + w is big-endian word w of SHA-256(key + byte d), key
 * being chash_nghttpx_key()'s bytes.  Returns 0, CHASH_ENOMEM (a ";dns" id
 * too long for the stack) or CHASH_EINVAL (a bad id, or first + count
 * above CHASH_NGHTTPX_POINTS).
 */
int chash_nghttpx_points(const char *id, size_t id_len, size_t first, size_t count,
                         uint32_t *out);

#endif /* CHASH_SCHEME_NGHTTPX_H */
