"""The Lua scripts that read and change a shared ring in Redis.

They are how the Redis store performs the operations of the store contract
(``chash.membership.store``), one script each; ``codec`` builds their
``ARGV`` and reads their replies into the contract's records, and nothing
outside this package sees them.  Every change to a ring runs as one
script, so it is atomic: no other client
sees it half done, and two writers never interleave.  Every script checks
the whole store before it writes anything (the metadata first, then every
vote record and verdict it will use, decoded up front), so a script either
fails before any write or does not fail: no half-applied change can exist.
Unreadable entries are skipped, and named in the reply so that the caller
can log them.  A script that changes what the ring holds (``nodes``,
``disabled``, ``down``) bumps the ring's version, clears its digest (or,
for ``WRITE`` given one, records the new version's) and publishes
``epoch:version`` on the ring's channel; a script that changes
nothing bumps nothing, so the health checkers' periodic re-votes cost no
resynchronisation.

Keys (all share the hash tag ``{name}``, so a cluster keeps them together):

``meta``      hash: ``epoch`` (random, new whenever the ring is seeded or
              Redis was seen going back), ``version`` (integer),
              ``config`` (settings every instance must share),
              ``count``, ``ndisabled`` and ``norder`` (how many entries ``nodes``,
              ``disabled`` and ``order`` hold, to notice a store that lost
              a key while keeping the others), ``seq`` (the last add
              sequence given out), ``digest`` (the ring's
              ``router.fingerprint()`` at this version, stamped by the first
              instance that applied it, or by ``WRITE`` with the change)
``nodes``     hash: node -> weight, as Python's ``repr(float)``
``order``     hash: node -> its add sequence (a positive integer, from
              ``HINCRBY meta seq 1`` when the node joined ``nodes``): the
              order in which the nodes were added, which breaks ties in the
              ``nginx``, ``ketama`` and ``libmemcached`` layouts.  Redis
              returns a hash's fields in insertion order only while it is
              small (listpack), so the order is stored, never inferred
``disabled``  hash: node -> reason, nodes an operator took out
``down``      hash: node -> JSON ``{r: reason, n: down votes, l: live
              reporters, t: ms, s: 1 if carried over by a re-seed}``, nodes
              the health verdicts took out
``votes``     hash: node -> JSON ``{reporter: [1 if down else 0, ms,
              reason]}``, the latest verdict of each reporter
``history``   list: the ring's last changes, newest first, each JSON ``{e:
              epoch, v: version, a: action, n: node, w: value, t: ms}``
              (``chash.membership.state.Change``), pushed by the script that
              makes the change and trimmed to ``HISTORY_LENGTH``.  Added
              after the other keys: an instance of a version without it
              passes six keys, and its changes are simply not in the list
``zones``     hash: node -> its zone, for the nodes given one (``chash ring
              add --zone``).  Added after ``history``: an instance of a
              version without it passes seven keys and neither reads nor
              writes zones, so a ring it wrote reads as nodes in no zone,
              and a node it removed may leave its zone behind, which
              ``SNAPSHOT``'s readers ignore and the next add of that node
              replaces

Times are the Redis server's clock (``TIME``), in milliseconds, so gateway
clocks never need to agree.  Announcements use sharded pub/sub
(``SPUBLISH``) on Redis 7 and newer, ``PUBLISH`` before; ``SNAPSHOT`` tells
the listeners which one.

Scripts reply with an array whose first item is a status: 1 changed,
0 unchanged, then the epoch and version after the script, then the
unreadable entries skipped (a flat list of key, node, value) and, for
``WRITE``, the nodes in service before the change and how many it took
out.  Other statuses: -1 the ring does not exist (Redis lost it, or it was
never seeded), -2 no such node, ``{-3, why}`` the store is damaged (a key
lost, a field unreadable), ``{-4, in service, removed}`` a change refused
because it would take out more than half of the nodes in service, ``{-5,
config}`` the caller's shared settings differ from the ring's.  Requires
Redis 5 or newer (scripts replicated by their effects, so ``TIME`` may
precede writes).
"""

from __future__ import annotations

from chash.membership.store import HISTORY_LENGTH

__all__ = ["HEAD", "HISTORY", "REEPOCH", "SCRIPTS", "SEED", "SNAPSHOT", "STAMP", "SWEEP", "VOTE",
           "WRITE"]

# KEYS: meta, nodes, disabled, down, votes, order, history, zones (the same
# eight for every script).
_COMMON = r"""
local meta, nodes, disabled, down, votes, order = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5],
  KEYS[6]
local history = KEYS[7]
local zones = KEYS[8]
local HISTORY_LENGTH = @HISTORY_LENGTH@
-- the changes this script makes, {action, node, value}, for the history
local changes = {}
local SHARDED = redis.REDIS_VERSION_NUM ~= nil and redis.REDIS_VERSION_NUM >= 0x070000

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function announce(channel, message)
  if SHARDED then
    redis.call('SPUBLISH', channel, message)
  else
    redis.call('PUBLISH', channel, message)
  end
end

-- nil if the store is sound, else the reply to give: {-1} if there is no
-- ring, {-3, why} if part of it is gone or unreadable.  Reads only.
local function damage()
  if redis.call('EXISTS', meta) == 0 then return {-1} end
  local m = redis.call('HMGET', meta, 'epoch', 'version', 'count', 'ndisabled', 'norder', 'seq')
  if not m[1] or m[1] == '' then return {-3, 'meta has no epoch'} end
  for _, field in ipairs({{m[2], 'version'}, {m[6], 'seq'}}) do
    local v = tonumber(field[1])
    if (field[1] or field[2] == 'version') and
        (not v or v < 0 or v ~= math.floor(v) or not string.match(field[1], '^%d+$')) then
      return {-3, 'meta.' .. field[2] .. ' is not a count: ' .. tostring(field[1])}
    end
  end
  for _, check in ipairs({{m[3], nodes, 'count'}, {m[4], disabled, 'ndisabled'},
                          {m[5], order, 'norder'}}) do
    if check[1] then
      local held = redis.call('HLEN', check[2])
      if tonumber(check[1]) ~= held then
        return {-3, 'meta.' .. check[3] .. ' is ' .. check[1] .. ' but ' .. held ..
                    ' entries are stored'}
      end
    end
  end
  return nil
end

-- Note a change for the history.
local function note(action, node, value)
  changes[#changes + 1] = {action, node or '', value or ''}
end

-- Keep the changes noted in the history, at epoch:version.
local function keep(epoch, version)
  if not history or #changes == 0 then return end
  local t = redis.call('TIME')
  local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  for _, change in ipairs(changes) do
    redis.call('LPUSH', history, cjson.encode({e = epoch, v = tonumber(version), a = change[1],
                                               n = change[2], w = change[3], t = ms}))
  end
  redis.call('LTRIM', history, 0, HISTORY_LENGTH - 1)
end

-- Announce a change: record the counts, forget the digest of the old
-- ring, bump the version, keep the changes noted in the history and
-- publish epoch:version.
local function bump(channel)
  redis.call('HSET', meta, 'count', redis.call('HLEN', nodes),
             'ndisabled', redis.call('HLEN', disabled), 'norder', redis.call('HLEN', order))
  redis.call('HDEL', meta, 'digest')
  local epoch = redis.call('HGET', meta, 'epoch')
  local version = redis.call('HINCRBY', meta, 'version', 1)
  keep(epoch, version)
  announce(channel, epoch .. ':' .. version)
end

local function reply(status, skipped)
  local m = redis.call('HMGET', meta, 'epoch', 'version')
  return {status, m[1], tonumber(m[2]), skipped or {}}
end

-- A JSON value, or nil if it does not decode.
local function decode(raw)
  local ok, value = pcall(cjson.decode, raw)
  if ok then return value end
  return nil
end

-- A votes record {reporter: [0|1, ms, reason]} with every vote well
-- formed, or nil.
local function decode_record(raw)
  local record = decode(raw)
  if type(record) ~= 'table' then return nil end
  for reporter, vote in pairs(record) do
    if type(reporter) ~= 'string' or type(vote) ~= 'table'
        or (vote[1] ~= 0 and vote[1] ~= 1) or type(vote[2]) ~= 'number'
        or (vote[3] ~= nil and type(vote[3]) ~= 'string') then
      return nil
    end
  end
  return record
end

-- The down verdict of a node as a table, false if there is none, and
-- whether it was unreadable (then it counts as a verdict nobody stands by).
local function read_verdict(node)
  local raw = redis.call('HGET', down, node)
  if not raw then return false, false, nil end
  local verdict = decode(raw)
  if type(verdict) ~= 'table' or type(verdict.t) ~= 'number' then
    return {t = 0}, true, raw
  end
  return verdict, false, raw
end

-- Whether `downs` down votes out of `live` live reporters take a node out.
local function quorum_met(downs, live, quorum)
  if downs == 0 then return false end
  if quorum == 'majority' then return downs * 2 > live end
  if quorum == 'any' then return true end
  if quorum == 'all' then return downs == live end
  return downs >= math.min(tonumber(quorum), live)
end

-- Forget expired votes of `node`, store the rest, and decide from them
-- whether the node is down.  With no live vote left a down verdict lapses:
-- nobody stands by it.  The exception is a verdict carried over by SEED
-- (its votes were lost with the store), kept until it is `ttl` old so that
-- the checkers have time to vote again.  `current` is the node's verdict
-- as read by read_verdict (decoded before any write).
-- Returns true if the node went down or came back.
local function settle(node, record, current, now, ttl, quorum)
  local live, downs, reason, latest = 0, 0, '', -1
  for reporter, vote in pairs(record) do
    if now - vote[2] > ttl then
      record[reporter] = nil
    else
      live = live + 1
      if vote[1] == 1 then
        downs = downs + 1
        if vote[2] > latest then latest, reason = vote[2], vote[3] or '' end
      end
    end
  end
  if next(record) == nil then
    redis.call('HDEL', votes, node)
  else
    redis.call('HSET', votes, node, cjson.encode(record))
  end
  local out
  if live == 0 then
    out = current and current.s == 1 and now - current.t <= ttl or false
  else
    out = quorum_met(downs, live, quorum)
  end
  if out and not current then
    redis.call('HSET', down, node, cjson.encode({r = reason, n = downs, l = live, t = now}))
    note('down', node, reason)
    return true
  end
  if current and not out then
    redis.call('HDEL', down, node)
    note('up', node, '')
    return true
  end
  return false
end
"""

_COMMON = _COMMON.replace("@HISTORY_LENGTH@", str(HISTORY_LENGTH))

#: Read the whole ring: ``{1, epoch, version, config, nodes, disabled,
#: down, digest or false, 1 if announcements are sharded else 0, order,
#: zones}`` with each hash flattened; ``{-1}`` or ``{-3, why}``.
SNAPSHOT = _COMMON + r"""
local d = damage()
if d then return d end
local m = redis.call('HMGET', meta, 'epoch', 'version', 'config', 'digest')
return {1, m[1], tonumber(m[2]), m[3], redis.call('HGETALL', nodes),
        redis.call('HGETALL', disabled), redis.call('HGETALL', down), m[4],
        SHARDED and 1 or 0, redis.call('HGETALL', order),
        zones and redis.call('HGETALL', zones) or {}}
"""

#: The ring's position and digest, for the periodic check:
#: ``{1, epoch, version, digest or false}``, ``{-1}`` or ``{-3, why}``.
HEAD = _COMMON + r"""
local d = damage()
if d then return d end
local m = redis.call('HMGET', meta, 'epoch', 'version', 'digest')
return {1, m[1], tonumber(m[2]), m[3]}
"""

#: Record the digest of the ring at a version, if nobody did yet.  ARGV:
#: epoch, version, digest.  Replies 1 if stamped, 0 if the ring moved on or
#: already has one.  Changes no ring content, so bumps nothing.
STAMP = _COMMON + r"""
if damage() then return 0 end
local m = redis.call('HMGET', meta, 'epoch', 'version', 'digest')
if m[1] ~= ARGV[1] or tonumber(m[2]) ~= tonumber(ARGV[2]) or m[3] then return 0 end
redis.call('HSET', meta, 'digest', ARGV[3])
return 1
"""

#: Start a new epoch after Redis was seen going back (or holding another
#: ring at the version an instance applied), so that every instance reads
#: the ring again whatever version it holds.  ARGV: channel, epoch and
#: version seen, new epoch, new version.  Only if the ring is still where it
#: was seen; replies as a write.
REEPOCH = _COMMON + r"""
local d = damage()
if d then return d end
local m = redis.call('HMGET', meta, 'epoch', 'version')
if m[1] ~= ARGV[2] or tonumber(m[2]) ~= tonumber(ARGV[3]) then return reply(0) end
redis.call('HSET', meta, 'epoch', ARGV[4], 'version', ARGV[5])
redis.call('HDEL', meta, 'digest')
note('reepoch', '', '')
keep(ARGV[4], ARGV[5])
announce(ARGV[1], ARGV[4] .. ':' .. ARGV[5])
return reply(1)
"""

#: Create the ring if it does not exist, and only then; with ``restore``
#: set, also replace a damaged one.
#: ARGV: channel, epoch, version, config, restore (1 or 0), then the count
#: of nodes and their (node, weight) pairs in add order (they get the add
#: sequences 1, 2, ... in that order), the count of disabled nodes and
#: their (node, reason) pairs, the count of zoned nodes and their (node,
#: zone) pairs, and (node, down JSON) pairs up to the end.
#: Replies ``{1, epoch, version}`` if it seeded, ``{0, epoch, version}`` if
#: a sound ring existed already (someone else seeded it first), ``{-3,
#: why}`` for a damaged ring without ``restore``.
SEED = _COMMON + r"""
local d = damage()
if not d then return reply(0) end
if d[1] == -3 and ARGV[5] ~= '1' then return d end
local verdicts = {}
local i = 7
local n_nodes = tonumber(ARGV[6])
i = i + 2 * n_nodes
local n_disabled = tonumber(ARGV[i])
local z = i + 1 + 2 * n_disabled
local n_zones = tonumber(ARGV[z])
local j = z + 1 + 2 * n_zones
while j < #ARGV do
  local verdict = decode(ARGV[j + 1])
  if type(verdict) == 'table' then verdicts[#verdicts + 1] = {ARGV[j], verdict} end
  j = j + 2
end
local now = now_ms()
redis.call('DEL', meta, nodes, disabled, down, votes, order)
if zones then
  redis.call('DEL', zones)
  for k = z + 1, z + 2 * n_zones, 2 do redis.call('HSET', zones, ARGV[k], ARGV[k + 1]) end
end
i = 7
for k = 1, n_nodes do
  redis.call('HSET', nodes, ARGV[i], ARGV[i + 1])
  redis.call('HSET', order, ARGV[i], k)
  i = i + 2
end
i = i + 1
for _ = 1, n_disabled do
  redis.call('HSET', disabled, ARGV[i], ARGV[i + 1])
  i = i + 2
end
for _, pair in ipairs(verdicts) do
  pair[2].t = now
  pair[2].s = 1
  redis.call('HSET', down, pair[1], cjson.encode(pair[2]))
end
redis.call('HSET', meta, 'epoch', ARGV[2], 'version', ARGV[3], 'config', ARGV[4],
           'count', redis.call('HLEN', nodes), 'ndisabled', redis.call('HLEN', disabled),
           'norder', redis.call('HLEN', order), 'seq', n_nodes)
note('seed', '', tostring(n_nodes))
keep(ARGV[2], ARGV[3])
announce(ARGV[1], ARGV[2] .. ':' .. ARGV[3])
return reply(1)
"""

#: An operator's change.  ARGV: channel, op, node, value, force (1 or 0),
#: config, to give a zone ``1`` and the zone (``0`` and '' for none), and
#: to stamp the new version the epoch and version the stamp was computed
#: at and the digest; op is ``add`` (value:
#: the weight; adds the node or reweighs it; with a zone given, sets the
#: node's zone, an empty one clearing it, and without one keeps an
#: existing node's zone and gives a new node none),
#: ``remove``, ``disable`` (value: the reason) or ``enable``.  A removal or
#: a disable that would take out more than half of the nodes in service is
#: refused (``{-4, in service, 1}``) unless forced.  A change that bumps
#: the version records the digest given as the new version's, only if the
#: ring was at exactly the epoch and version given before it (else, as
#: without one, the new version has none).
WRITE = _COMMON + r"""
local d = damage()
if d then return d end
local channel, op, node, value, force = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5] == '1'
local at = redis.call('HMGET', meta, 'epoch', 'version')
local config = redis.call('HGET', meta, 'config')
if config ~= ARGV[6] then return {-5, config or ''} end
if op ~= 'add' and op ~= 'remove' and op ~= 'disable' and op ~= 'enable' then
  return redis.error_reply('unknown operation ' .. op)
end
local exists = redis.call('HEXISTS', nodes, node) == 1
if op ~= 'add' and not exists then return {-2} end
local in_service, removed = 0, 0
if op == 'remove' or op == 'disable' then
  for _, other in ipairs(redis.call('HKEYS', nodes)) do
    if redis.call('HEXISTS', disabled, other) == 0 and redis.call('HEXISTS', down, other) == 0 then
      in_service = in_service + 1
    end
  end
  if redis.call('HEXISTS', disabled, node) == 0 and redis.call('HEXISTS', down, node) == 0 then
    removed = 1
  end
  if op == 'disable' and redis.call('HEXISTS', disabled, node) == 1 then
    return reply(0)
  end
  if removed * 2 > in_service and not force then return {-4, in_service, removed} end
end
if op == 'add' then
  -- the zone to set ('' clears it), or nil to keep the one held
  local zone = nil
  if zones and ARGV[7] == '1' then zone = ARGV[8] or '' elseif zones and not exists then zone = '' end
  local held = zones and redis.call('HGET', zones, node) or ''
  local reweigh = redis.call('HGET', nodes, node) ~= value
  local rezone = zone ~= nil and held ~= zone
  if not reweigh and not rezone then return reply(0) end
  if reweigh then
    if not exists then
      -- a new node goes to the end of the add order; a reweighed one keeps its place
      redis.call('HSET', order, node, redis.call('HINCRBY', meta, 'seq', 1))
    end
    redis.call('HSET', nodes, node, value)
    note('add', node, value)
  end
  if rezone then
    if zone == '' then redis.call('HDEL', zones, node) else redis.call('HSET', zones, node, zone) end
    -- a zone a removed node left behind is dropped without a word
    if exists or zone ~= '' then note('zone', node, zone) end
  end
elseif op == 'remove' then
  redis.call('HDEL', nodes, node)
  redis.call('HDEL', order, node)
  redis.call('HDEL', disabled, node)
  redis.call('HDEL', down, node)
  redis.call('HDEL', votes, node)
  if zones then redis.call('HDEL', zones, node) end
elseif op == 'disable' then
  redis.call('HSET', disabled, node, value)
elseif op == 'enable' then
  if redis.call('HDEL', disabled, node) == 0 then return reply(0) end
end
if op ~= 'add' then note(op, node, value) end
bump(channel)
if ARGV[11] and at[1] == ARGV[9] and tonumber(at[2]) == tonumber(ARGV[10]) then
  redis.call('HSET', meta, 'digest', ARGV[11])
end
local r = reply(1)
r[5], r[6] = in_service, removed
return r
"""

#: One reporter's health verdicts.  ARGV: channel, reporter, vote TTL in
#: ms, quorum, then (node, 1 if down else 0, reason) triples.  Votes on
#: nodes the ring does not hold are ignored; an unreadable votes record is
#: replaced by the new vote and reported as skipped.
VOTE = _COMMON + r"""
local d = damage()
if d then return d end
local channel, reporter, ttl, quorum = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local now = now_ms()
local skipped = {}
local work = {}
for i = 5, #ARGV - 2, 3 do
  local node = ARGV[i]
  if redis.call('HEXISTS', nodes, node) == 1 then
    local raw = redis.call('HGET', votes, node)
    local record = {}
    if raw then
      record = decode_record(raw)
      if record == nil then
        record = {}
        for _, item in ipairs({'votes', node, raw}) do skipped[#skipped + 1] = item end
      end
    end
    local current, unreadable, raw_verdict = read_verdict(node)
    if unreadable then
      for _, item in ipairs({'down', node, raw_verdict}) do skipped[#skipped + 1] = item end
    end
    record[reporter] = {tonumber(ARGV[i + 1]), now, ARGV[i + 2]}
    work[#work + 1] = {node, record, current}
  end
end
local changed = false
for _, item in ipairs(work) do
  if settle(item[1], item[2], item[3], now, ttl, quorum) then changed = true end
end
if changed then bump(channel) end
return reply(changed and 1 or 0, skipped)
"""

#: Expire old votes and re-decide every node, optionally withdrawing every
#: vote of one reporter first.  ARGV: channel, vote TTL in ms, quorum,
#: reporter to withdraw (empty for none).  Unreadable votes records are
#: left alone and reported as skipped.
SWEEP = _COMMON + r"""
local d = damage()
if d then return d end
local channel, ttl, quorum, gone = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local now = now_ms()
local skipped = {}
local work = {}
local orphans = {}
local all = redis.call('HGETALL', votes)
for i = 1, #all, 2 do
  local node = all[i]
  if redis.call('HEXISTS', nodes, node) == 0 then
    orphans[#orphans + 1] = node
  else
    local record = decode_record(all[i + 1])
    if record == nil then
      for _, item in ipairs({'votes', node, all[i + 1]}) do skipped[#skipped + 1] = item end
    else
      if gone ~= '' then record[gone] = nil end
      local current, unreadable, raw = read_verdict(node)
      if unreadable then
        for _, item in ipairs({'down', node, raw}) do skipped[#skipped + 1] = item end
      end
      work[#work + 1] = {node, record, current}
    end
  end
end
local stale, lone = {}, {}
for _, node in ipairs(redis.call('HKEYS', down)) do
  if redis.call('HEXISTS', nodes, node) == 0 then
    stale[#stale + 1] = node
  elseif redis.call('HEXISTS', votes, node) == 0 then
    local current, unreadable, raw = read_verdict(node)
    if unreadable then
      for _, item in ipairs({'down', node, raw}) do skipped[#skipped + 1] = item end
    end
    lone[#lone + 1] = {node, {}, current}
  end
end
local changed = false
for _, node in ipairs(orphans) do redis.call('HDEL', votes, node) end
for _, node in ipairs(stale) do
  redis.call('HDEL', down, node)
  note('up', node, '')
  changed = true
end
for _, item in ipairs(work) do
  if settle(item[1], item[2], item[3], now, ttl, quorum) then changed = true end
end
for _, item in ipairs(lone) do
  if settle(item[1], item[2], item[3], now, ttl, quorum) then changed = true end
end
if changed then bump(channel) end
return reply(changed and 1 or 0, skipped)
"""

#: The ring's last changes: ``{1, entries}``, the history list as stored
#: (newest first), ``{-1}`` or ``{-3, why}``.
HISTORY = _COMMON + r"""
local d = damage()
if d then return d end
if not history then return {1, {}} end
return {1, redis.call('LRANGE', history, 0, -1)}
"""

#: Every script by name, as ``codec`` names them.
SCRIPTS = {"SNAPSHOT": SNAPSHOT, "HEAD": HEAD, "STAMP": STAMP, "REEPOCH": REEPOCH,
           "SEED": SEED, "WRITE": WRITE, "VOTE": VOTE, "SWEEP": SWEEP, "HISTORY": HISTORY}
