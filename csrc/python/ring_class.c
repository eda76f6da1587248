/*
 * ring_class.c - the ConsistentHashRouter class (family.h's ring_class):
 * its constructor, which parses its arguments and picks the family by
 * layout (ring32/ for the 32-bit layouts, ring64.c for envoy and grpc),
 * and its docstrings.  Everything else of the type is the shell's
 * (router.c).  ConsistentHashRouter is the one router class that may be
 * subclassed.  Part of chash._chash.
 */
#include "family.h"

#include "args.h"

/* ------------------------------------------------------------------ */
/* Construction                                                       */

static PyObject *ring_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"virtual_node_count", "hash", "layout", "minimum_ring_size",
                             "maximum_ring_size", NULL};
    PyObject *vnodes = Py_None, *hash = Py_None, *layout = NULL, *min_ring = NULL, *max_ring = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O$OOOO:ConsistentHashRouter", kwlist,
                                     &vnodes, &hash, &layout, &min_ring, &max_ring))
        return NULL;
    RouterObject *self = router_alloc(type);
    if (!self)
        return NULL;
    int status;
    if (ring64_layout(layout)) {
        if (vnodes != Py_None) {
            PyErr_Format(PyExc_ValueError,
                         "the %U layout sizes its ring by minimum_ring_size and maximum_ring_size, "
                         "not virtual_node_count", layout);
            status = -1;
        } else {
            status = ring64_init(self, layout, hash, min_ring, max_ring);
        }
    } else if ((min_ring && min_ring != Py_None) || (max_ring && max_ring != Py_None)) {
        PyErr_SetString(PyExc_ValueError,
                        "minimum_ring_size and maximum_ring_size apply to the envoy and grpc "
                        "layouts only");
        status = -1;
    } else {
        Py_ssize_t count;
        int given;
        PyObject *name = layout ? Py_NewRef(layout) : PyUnicode_FromString("python");
        status = name && parse_vnodes(vnodes, &count, &given) == 0
                     ? ring32_init(self, count, given, hash, name) : -1;
        Py_XDECREF(name);
    }
    if (status < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}



#define RING_PROPERTIES                                                                  \
    {                                                                                    \
        [RP_VNODES] = "Points a node of weight 1 owns (0: the envoy and grpc layouts size the\n" \
                      "ring by minimum_ring_size and maximum_ring_size).",                \
        [RP_MIN_RING] = "The envoy and grpc layouts' minimum ring size; None for the others.", \
        [RP_MAX_RING] = "The envoy and grpc layouts' maximum ring size (gRPC caps both at\n" \
                        "4096); None for the others.",                                    \
        [RP_HASH_RING] = "Every ring point, sorted (a new list each time).",             \
        [RP_NODE_MAP] = "{point: node} (a new dict each time); a point shared by several nodes\n" \
                        "maps to the node the ring routes it to.",                        \
        [RP_NODES] = "The nodes, in the order they were added.",                         \
        [RP_WEIGHTS] = "{node: weight}.",                                                \
        [RP_POINTS] = "{node: number of ring points it owns} (0 for a host the envoy or grpc\n" \
                      "ring has no room for).",                                           \
        [RP_HASH] = "The hash: its name, or the callable.",                              \
        [RP_LAYOUT] = "The layout: 'python', 'node', 'ketama', 'nginx', 'libmemcached',\n" \
                      "'haproxy', 'varnish', 'nghttpx', 'envoy' or 'grpc'.",             \
        [RP_MEMORY] = "Heap bytes the ring holds.",                                      \
        [RP_IDS] = "{node: server id} of the haproxy layout (HAProxy's puids, which decide\n" \
                   "the points); empty for the other layouts.",                          \
        [RP_ZONES] = "{node: zone} of the nodes added with a zone (a new dict each time).", \
        [RP_WEIGHT_RULE] = WEIGHT_RULE_DOC,                                              \
    }

/* ------------------------------------------------------------------ */
/* The docstrings                                                     */

PyDoc_STRVAR(add_doc,
"add_service_node($self, /, real_node_id, weight=1.0, *, id=None, zone=None)\n--\n\n"
"Add a node, or give a present one a new weight.\n\n"
"In the 32-bit layouts the node owns round(virtual_node_count * weight)\n"
"points (at least 1); adding a node already present with the same weight\n"
"does nothing; with another weight, the node gains or loses only points of\n"
"its own, so keys move only onto or off that node.  The nginx, ketama and\n"
"libmemcached layouts take integer weights as their references do; in\n"
"ketama (and in libmemcached once a weight is above 1) every node's point\n"
"count follows from its share of the total weight, so any change\n"
"recomputes them all.  The envoy and grpc layouts take integer weights\n"
"from 1 to 2**32 - 1 and rebuild the ring, as their references do on every\n"
"host change.\n\n"
"id is the haproxy layout's server id (puid, 1 .. 2**31-1), which decides\n"
"the node's points: given, it must be free; None numbers the node as\n"
"HAProxy numbers a server without an id, counting in add order.  Other\n"
"layouts take no id.\n\n"
"zone names the node's zone (a datacentre, a rack) for\n"
"get_preference_list(..., distinct_zones=True) and chash.zones; it never\n"
"changes routing.  None leaves a node present as it was (a new node has\n"
"no zone).  Cost: in the 32-bit layouts O(P + p log p), the node's p\n"
"points sorted and merged into the ring's P (ketama, and libmemcached once\n"
"a weight is above 1: O(n + P log P), every node's points recounted);\n"
"O(n + P log P) rebuild in the envoy and grpc layouts.");

PyDoc_STRVAR(add_many_doc,
"add_service_nodes($self, /, nodes, weight=1.0)\n--\n\n"
"add_service_node(node, weight) for every node of an iterable, faster: the\n"
"new nodes enter the ring in one step, all or none of them.  Nodes already\n"
"present get the weight as add_service_node would give it.  Cost: in the\n"
"32-bit layouts O(P + p log p), the new nodes' p points sorted and merged\n"
"into the ring's P once; O(n + P log P) rebuild in the envoy and grpc\n"
"layouts (and ketama's).");

PyDoc_STRVAR(remove_doc,
"remove_service_node($self, real_node_id, /)\n--\n\n"
"Remove a node and all its points; KeyError if it is not in the ring.\n"
"Cost: O(P) in the 32-bit layouts, the ring's P points compacted (ketama,\n"
"and libmemcached once a weight is above 1: O(n + P log P), every node's\n"
"points recounted); O(n + P log P) rebuild in the envoy and grpc layouts.");

PyDoc_STRVAR(discard_doc,
"discard_service_node($self, real_node_id, /)\n--\n\n"
"Remove a node if it is in the ring; do nothing otherwise.  Cost: as\n"
"remove_service_node.");

PyDoc_STRVAR(get_doc,
"get_target_node($self, request_key, /)\n--\n\n"
"The node owning the first ring point >= the key's hash, wrapping around\n"
"(the nearest point either way for the haproxy layout; Varnish's own\n"
"lookup for the varnish layout, which keeps a hash above the last point at\n"
"the last point); None when the ring is empty.  request_key is a str or bytes; the envoy and grpc layouts hash\n"
"it with XXH64, as Envoy's header hash policy and gRPC's\n"
"request_hash_header do.");

PyDoc_STRVAR(get_many_doc,
"get_target_nodes($self, keys, /)\n--\n\n"
"get_target_node for every key of an iterable, as a list.");

PyDoc_STRVAR(get_by_hash_doc,
"get_target_node_by_hash($self, hash, /)\n--\n\n"
"The node owning the first ring point >= hash, wrapping around, for a hash\n"
"computed by the caller: an int from 0 to 2**32 - 1 (2**64 - 1 for the\n"
"envoy and grpc layouts); None on an empty ring.");

PyDoc_STRVAR(get_many_by_hash_doc,
"get_target_nodes_by_hash($self, hashes, /)\n--\n\n"
"get_target_node_by_hash for every hash of an iterable of ints, as a list;\n"
"all are checked before any is looked up.");

PyDoc_STRVAR(preference_doc,
"get_preference_list($self, key, n, /, *, distinct_zones=False)\n--\n\n"
"The first n distinct nodes met walking the ring clockwise from key's\n"
"owner, owner first (fewer when the ring holds fewer): replicas or\n"
"fallbacks.  With distinct_zones, the owner first, then the next nodes\n"
"clockwise whose zone is not yet in the list (a node without a zone counts\n"
"as a zone of its own), so n copies land in n zones when there are n.");

PyDoc_STRVAR(ownership_doc,
"ownership($self, /)\n--\n\n"
"{node: fraction of the ring's positions (2**32, or 2**64) it owns}; the\n"
"values sum to 1.");

PyDoc_STRVAR(distribution_doc,
"key_distribution($self, keys, /)\n--\n\n"
"{node: how many of the keys route to it}, every node listed (0 included).");

PyDoc_STRVAR(fingerprint_doc,
"fingerprint($self, /)\n--\n\n"
"A 16-digit hex checksum of what decides routing: the layout, hash and\n"
"sizes, and every ring point with its owner's name.  Equal on every\n"
"process that holds the same ring.");

PyDoc_STRVAR(diff_doc,
"diff($self, other, /)\n--\n\n"
"The arcs of the ring whose owner differs between this router and other\n"
"(the same layout and hash), as chash.Move(start, end, source, target)\n"
"named tuples in ring order.  An arc holds the hashes h with\n"
"start < h <= end, wrapping past the top of the ring (2**32, or 2**64 for\n"
"the envoy and grpc layouts) when start > end; start == end is the whole\n"
"ring.  Keys hashing inside an arc move from source (this router's owner)\n"
"to target (other's); no other key changes owner.");

PyDoc_STRVAR(calc_doc,
"_calculate_hash($self, key, /)\n--\n\n"
"The ring position of a str or bytes key (0 <= h < 2**32, or 2**64).");

PyDoc_STRVAR(check_doc,
"_check($self, /)\n--\n\n"
"Verify every invariant of the ring; AssertionError if one is broken.");

PyDoc_STRVAR(reduce_doc, "__reduce__($self, /)\n--\n\nPickle support: rebuilt from its nodes.");

PyDoc_STRVAR(setstate_doc,
"__setstate__($self, state, /)\n--\n\n"
"Restore the zones a pickle carries ({'zones': {node: zone}}).");

PyDoc_STRVAR(replace_doc,
"_replace_nodes($self, nodes, /)\n--\n\n"
"Make the ring hold exactly nodes, a list of (node, weight) pairs ((node,\n"
"weight, id) for the haproxy layout), added in that order, in one step:\n"
"lookups see the old ring or the new one.  For keeping the order that\n"
"breaks ties the same on several processes.  Cost: O(n + P log P)\n"
"rebuild.");


PyDoc_STRVAR(router_doc,
"ConsistentHashRouter(virtual_node_count=None, *, hash=None, layout='python',\n"
"                     minimum_ring_size=None, maximum_ring_size=None)\n--\n\n"
"A consistent-hash ring routing keys to nodes.\n\n"
"With the defaults it routes exactly like the documented pure-Python\n"
"ConsistentHashRouter: MD5 of the key's UTF-8 bytes mod 2**32, virtual keys\n"
"'{node}_virtual_{i}', the first point >= the key's hash, wrapping around.\n"
"layout 'nginx', 'ketama' and 'libmemcached' build the rings of nginx's\n"
"hash ... consistent, libketama (twemproxy, libmemcached ketama_weighted)\n"
"and libmemcached's ketama, integer weights and ties to the node added\n"
"first included.  hash defaults to the layout's (md5; crc32 for nginx,\n"
"one_at_a_time for libmemcached); virtual_node_count to the layout's own\n"
"(python 100, node 150, ketama 160, nginx 160, libmemcached 100) and must\n"
"lie in [1, 1000000].\n\n"
"layout 'haproxy' builds HAProxy's hash-type consistent ring: weight x 16\n"
"points per server, from its id (add_service_node(..., id=)), and the\n"
"nearest point either way, a tie to the one before; hash 'sdbm_avalanche'\n"
"by default, or sdbm, djb2, wt6, crc32, each with or without _avalanche.\n\n"
"layout 'varnish' builds Varnish 7.1's shard director: points\n"
"'{ident}{i}' hashed with SHA-256 (the last 4 bytes, little-endian),\n"
"trunc(virtual_node_count x weight) per backend (its replicas, 67; weights\n"
">= 1), its own lookup (no wrap above the last point) and its walk as the\n"
"preference list.  layout 'nghttpx' builds nghttpx 1.52's affinity ring:\n"
"160 SHA-256 points per backend 'HOST:PORT' from its address (weight 1),\n"
"keys cut from SHA-256 as its affinity=ip is.\n\n"
"layout 'envoy' and 'grpc' build Envoy's RING_HASH and gRPC's ring_hash:\n"
"64-bit points '{node}_{i}' (hash 'xxh64', or 'murmur2_64' for envoy),\n"
"counts by weight share between minimum_ring_size (1024) and\n"
"maximum_ring_size (envoy 8388608, grpc 4096; grpc caps both at 4096),\n"
"keys hashed with XXH64, the ring rebuilt on every change.\n\n"
"ConsistentHashRouter may be subclassed (MaglevRouter, JumpRouter,\n"
"RendezvousRouter and AnchorRouter may not).");

const router_class ring_class = {
    .name = "chash.ConsistentHashRouter",
    .doc = router_doc,
    .subclassable = 1,
    .zones = 1,
    .make = ring_new,
    .family = &ring32_family,
    .methods = {
        ROUTER_COMMON_METHODS,
        [RM_GET_MANY_BY_HASH] = get_many_by_hash_doc,
        [RM_DIFF] = diff_doc,
        [RM_CALCULATE_HASH] = calc_doc,
        [RM_SETSTATE] = setstate_doc,
        [RM_REPLACE] = replace_doc,
    },
    .properties = RING_PROPERTIES,
};
