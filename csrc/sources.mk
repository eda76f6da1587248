# The C sources of chash, listed once (paths relative to csrc/).
#
# Read by setup.py (a small parser of `NAME := words` lines and $(NAME)
# references, nothing else of make), included by tests/c/Makefile and read
# through make by tests/fuzz/run.sh.  A new .c file is added here, to the
# list of its folder; setup.py refuses to build while a csrc/ .c file is in
# no list.

# The ring engine (csrc/engine/): the ring, its id index, its bulk path and
# the radix sort of points (a leaf).
RING_SOURCES := engine/ring.c engine/ring_index.c engine/ring_bulk.c engine/sort.c
# The sorted points of uhashring's continuums (csrc/engine/ring128.c).
RING128_SOURCES := engine/ring128.c
# The ring of 64-bit points built whole (csrc/engine/wide.c) and the
# rules of Envoy's and gRPC's rings and Envoy's Maglev over it
# (csrc/engine/envoy.c).
WIDE_SOURCES := engine/wide.c engine/envoy.c
# The arcs that change owner between two rings (csrc/engine/diff.c).
DIFF_SOURCES := engine/diff.c
# How keys and node ids become ring points (csrc/engine/scheme.c; HAProxy's
# points of a server id and nghttpx's of an address beside it), over the
# hash functions (csrc/hash/, one file per function or family).
SCHEME_SOURCES := engine/scheme.c engine/scheme_haproxy.c engine/scheme_nghttpx.c
# The haproxy layout's server ids and HAProxy's numbering of them
# (csrc/engine/haproxy_ids.c).
HAPROXY_ID_SOURCES := engine/haproxy_ids.c
HASH_SOURCES := hash/md5.c hash/sha1.c hash/sha256.c hash/murmur.c hash/murmur3_128.c hash/xxhash.c \
                hash/fnv1a.c hash/crc32.c hash/one_at_a_time.c \
                hash/sdbm.c hash/djb2.c hash/wt6.c hash/full_hash.c
# The gateway's policy over request heads llhttp accepted (csrc/http/).
HTTP_SOURCES := http/request_head.c
# Strategies beside the ring (csrc/strategies/, one file a strategy): jump
# (and modulo), rendezvous, Maglev (its permutations, fills, Envoy's table
# and lookups), bounded loads, over one mixer; JumpBackHash and
# JumpBackAnchor (hash4j's, any bucket removable).
STRATEGY_SOURCES := strategies/mix.c strategies/jump.c strategies/rendezvous.c \
                    strategies/maglev.c strategies/bounded.c \
                    strategies/jumpback.c strategies/anchor.c
# Prefix-cache affinity for LLM routing (csrc/strategies/affinity.c).
AFFINITY_SOURCES := strategies/affinity.c

# The engine: everything above; plain C11, no Python.
ENGINE_SOURCES := $(RING_SOURCES) $(RING128_SOURCES) $(WIDE_SOURCES) $(DIFF_SOURCES) $(SCHEME_SOURCES) $(HASH_SOURCES) $(STRATEGY_SOURCES) \
                  $(HTTP_SOURCES) $(HAPROXY_ID_SOURCES) $(AFFINITY_SOURCES)

# The CPython binding (csrc/python/), chash._chash: the only files that
# include Python.h.
BINDING_SOURCES := python/module.c python/args.c python/router.c python/get_bounded.c python/node_index.c python/ring_class.c python/zones.c python/diff.c \
                   python/ring32/family.c python/ring32/points.c python/ring32/mutate.c \
                   python/ring32/ketama.c python/ring32/haproxy.c python/ring32/build.c \
                   python/ring32/lookup.c python/ring32/inspect.c \
                   python/node_names.c python/node_list.c python/ring64.c python/maglev.c python/jump.c \
                   python/rendezvous.c python/rendezvous_nodes.c python/anchor.c python/bounded.c \
                   python/simulate.c python/http_head.c python/affinity.c python/uhashring.c \
                   python/epoch.c
