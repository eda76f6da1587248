// The Node.js ring of the design document (../shared/seeds/000_5cb9d89bf227f860.txt),
// class ConsistentHashRing copied as written there, and a driver that prints
// the routing vectors of tests/ring/test_router_layouts.py as JSON (hashes[i] and
// every ring's routes[i] belong to keys[i]):
//
//     node tests/vectors/node_ring.js > tests/vectors/node_ring.json
//
// The document's ring lets the last node written win a shared point, chash
// lets the smallest id win; the driver refuses node sets whose points
// collide, so every vector means the same thing under both rules.

const crypto = require('crypto');
class ConsistentHashRing {
  constructor(nodes = [], virtualNodes = 150) {
    this.virtualNodes = virtualNodes;
    this.ring = new Map(); // hash -> realNode
    this.sortedHashes = [];
    for (const node of nodes) {
      this.addNode(node);
    }
  }
  hash(key) {
    return parseInt(
      crypto.createHash('md5').update(String(key)).digest('hex').slice(0, 8),
      16
    );
  }
  addNode(node) {
    for (let i = 0; i < this.virtualNodes; i++) {
      const vnodeKey = `${node}#vnode${i}`;
      const hash = this.hash(vnodeKey);
      this.ring.set(hash, node);
      this.sortedHashes.push(hash);
    }
    this.sortedHashes.sort((a, b) => a - b);
  }
  removeNode(node) {
    for (let i = 0; i < this.virtualNodes; i++) {
      const vnodeKey = `${node}#vnode${i}`;
      const hash = this.hash(vnodeKey);
      this.ring.delete(hash);
    }
    this.sortedHashes = Array.from(this.ring.keys()).sort((a, b) => a - b);
  }
  getNode(key) {
    if (this.ring.size === 0) return null;
    const keyHash = this.hash(key);
    let left = 0;
    let right = this.sortedHashes.length - 1;
    while (left <= right) {
      const mid = (left + right) >> 1;
      if (this.sortedHashes[mid] >= keyHash) {
        right = mid - 1;
      } else {
        left = mid + 1;
      }
    }
    const targetHash = this.sortedHashes[left] ?? this.sortedHashes[0];
    return this.ring.get(targetHash);
  }
}
module.exports = ConsistentHashRing;

// ---------------------------------------------------------------------------
// Driver

const NODES = ['api-1', 'api-2', 'api-3', 'order-service-v1', '节点-4', '\u{1F600}-5'];

function vectorKeys() {
  const keys = [
    '', 'user:10086:profile', 'a\u0000b', '\u0000', 'é', '节点', '\u{1F600}',
    '\u{1D518}\u{1D52B}\u{1D526}', 'x'.repeat(2000), 'é'.repeat(700),
  ];
  for (let n = 1; n <= 70; n++) keys.push('k'.repeat(n));
  for (let i = 0; i < 400; i++) keys.push(`user:${i}:profile`);
  // Keys that hash exactly onto a point: the >= rule keeps them there.
  for (const node of NODES) {
    for (const i of [0, 1, 77, 119]) keys.push(`${node}#vnode${i}`);
  }
  return keys;
}

function snapshot(ring, keys) {
  // A shared point would make the vectors depend on the collision rule.
  if (ring.ring.size !== ring.sortedHashes.length) {
    throw new Error(`points collide: ${ring.sortedHashes.length - ring.ring.size} shared`);
  }
  return {
    sorted_hashes: ring.sortedHashes.slice(),
    routes: keys.map((key) => ring.getNode(key)),
  };
}

// JSON with one array element a line: small, and diffs stay readable.
function format(value, indent = '') {
  if (Array.isArray(value)) {
    const inner = indent + ' ';
    if (value.every((item) => typeof item !== 'object' || item === null || Array.isArray(item))) {
      return '[\n' + value.map((item) => inner + JSON.stringify(item)).join(',\n') + '\n' + indent + ']';
    }
    return '[\n' + value.map((item) => inner + format(item, inner)).join(',\n') + '\n' + indent + ']';
  }
  if (value !== null && typeof value === 'object') {
    const inner = indent + ' ';
    const fields = Object.entries(value).map(
      ([name, item]) => inner + JSON.stringify(name) + ': ' + format(item, inner));
    return '{\n' + fields.join(',\n') + '\n' + indent + '}' + (indent ? '' : '\n');
  }
  return JSON.stringify(value);
}

function main() {
  const keys = vectorKeys();
  const probe = new ConsistentHashRing([], 1);
  const out = {
    source: '../shared/seeds/000_5cb9d89bf227f860.txt, class ConsistentHashRing',
    nodes: NODES,
    keys,
    hashes: keys.map((key) => probe.hash(key)),
    rings: [],
  };
  for (const virtualNodes of [150, 120]) {
    const ring = new ConsistentHashRing(NODES, virtualNodes);
    out.rings.push({virtual_nodes: virtualNodes, removed: [], ...snapshot(ring, keys)});
  }
  const ring = new ConsistentHashRing(NODES, 150);
  ring.removeNode('api-2');
  ring.removeNode('节点-4');
  out.rings.push({virtual_nodes: 150, removed: ['api-2', '节点-4'], ...snapshot(ring, keys)});
  process.stdout.write(format(out));
}

if (require.main === module) {
  main();
}
