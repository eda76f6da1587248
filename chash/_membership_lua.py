"""The Lua scripts that read and change a shared ring in Redis.

Every change to a ring runs as one script, so it is atomic: no other client
sees it half done, and two writers never interleave.  A script that changes
what the ring holds bumps the ring's version and publishes ``epoch:version``
on the ring's channel; a script that changes nothing bumps nothing, so the
health checkers' periodic re-votes cost no resynchronisation.

Keys (all share the hash tag ``{name}``, so a cluster keeps them together):

``meta``      hash: ``epoch`` (random, new whenever the ring is seeded),
              ``version`` (integer), ``config`` (settings every instance
              must share)
``nodes``     hash: node -> weight, as Python's ``repr(float)``
``disabled``  hash: node -> reason, nodes an operator took out
``down``      hash: node -> JSON ``{r: reason, n: down votes, l: live
              reporters, t: ms, s: 1 if carried over by a re-seed}``, nodes
              the health verdicts took out
``votes``     hash: node -> JSON ``{reporter: [1 if down else 0, ms,
              reason]}``, the latest verdict of each reporter

Times are the Redis server's clock (``TIME``), in milliseconds, so gateway
clocks never need to agree.  Scripts reply with an array whose first item is
a status: 1 changed, 0 unchanged, -1 the ring does not exist (Redis lost it,
or it was never seeded), -2 no such node.  Requires Redis 5 or newer
(scripts replicated by their effects, so ``TIME`` may precede writes).
"""

from __future__ import annotations

__all__ = ["SEED", "SNAPSHOT", "SWEEP", "VOTE", "WRITE"]

# KEYS: meta, nodes, disabled, down, votes (the same five for every script).
_COMMON = r"""
local meta, nodes, disabled, down, votes = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Announce a change: bump the version and publish epoch:version.
local function bump(channel)
  local epoch = redis.call('HGET', meta, 'epoch')
  local version = redis.call('HINCRBY', meta, 'version', 1)
  redis.call('PUBLISH', channel, epoch .. ':' .. version)
end

local function reply(status)
  local m = redis.call('HMGET', meta, 'epoch', 'version')
  return {status, m[1], tonumber(m[2])}
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
-- the checkers have time to vote again.
-- Returns true if the node went down or came back.
local function settle(node, record, now, ttl, quorum)
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
  local current = redis.call('HGET', down, node)
  local out
  if live == 0 then
    if current then
      local verdict = cjson.decode(current)
      out = verdict.s == 1 and now - verdict.t <= ttl
    else
      out = false
    end
  else
    out = quorum_met(downs, live, quorum)
  end
  if out and not current then
    redis.call('HSET', down, node, cjson.encode({r = reason, n = downs, l = live, t = now}))
    return true
  end
  if current and not out then
    redis.call('HDEL', down, node)
    return true
  end
  return false
end
"""

#: Read the whole ring: ``{1, epoch, version, config, nodes, disabled,
#: down}`` with each hash flattened, or ``{-1}``.
SNAPSHOT = _COMMON + r"""
if redis.call('EXISTS', meta) == 0 then return {-1} end
local m = redis.call('HMGET', meta, 'epoch', 'version', 'config')
return {1, m[1], tonumber(m[2]), m[3], redis.call('HGETALL', nodes),
        redis.call('HGETALL', disabled), redis.call('HGETALL', down)}
"""

#: Create the ring if it does not exist, and only then.
#: ARGV: channel, epoch, version, config, then the count of nodes and their
#: (node, weight) pairs, the count of disabled nodes and their (node,
#: reason) pairs, and (node, down JSON) pairs up to the end.
#: Replies ``{1, epoch, version}`` if it seeded, ``{0, epoch, version}`` if
#: the ring existed already (someone else seeded it first).
SEED = _COMMON + r"""
if redis.call('EXISTS', meta) == 1 then return reply(0) end
redis.call('DEL', nodes, disabled, down, votes)
local i = 6
for _ = 1, tonumber(ARGV[5]) do
  redis.call('HSET', nodes, ARGV[i], ARGV[i + 1])
  i = i + 2
end
local n = tonumber(ARGV[i])
i = i + 1
for _ = 1, n do
  redis.call('HSET', disabled, ARGV[i], ARGV[i + 1])
  i = i + 2
end
while i < #ARGV do
  local verdict = cjson.decode(ARGV[i + 1])
  verdict.t = now_ms()
  verdict.s = 1
  redis.call('HSET', down, ARGV[i], cjson.encode(verdict))
  i = i + 2
end
redis.call('HSET', meta, 'epoch', ARGV[2], 'version', ARGV[3], 'config', ARGV[4])
redis.call('PUBLISH', ARGV[1], ARGV[2] .. ':' .. ARGV[3])
return reply(1)
"""

#: An operator's change.  ARGV: channel, op, node, value; op is ``add``
#: (value: the weight; adds the node or reweighs it), ``remove``,
#: ``disable`` (value: the reason) or ``enable``.
WRITE = _COMMON + r"""
if redis.call('EXISTS', meta) == 0 then return {-1} end
local channel, op, node, value = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
if op == 'add' then
  if redis.call('HGET', nodes, node) == value then return reply(0) end
  redis.call('HSET', nodes, node, value)
elseif op == 'remove' then
  if redis.call('HDEL', nodes, node) == 0 then return {-2} end
  redis.call('HDEL', disabled, node)
  redis.call('HDEL', down, node)
  redis.call('HDEL', votes, node)
elseif op == 'disable' then
  if redis.call('HEXISTS', nodes, node) == 0 then return {-2} end
  if redis.call('HEXISTS', disabled, node) == 1 then return reply(0) end
  redis.call('HSET', disabled, node, value)
elseif op == 'enable' then
  if redis.call('HEXISTS', nodes, node) == 0 then return {-2} end
  if redis.call('HDEL', disabled, node) == 0 then return reply(0) end
else
  return redis.error_reply('unknown operation ' .. op)
end
bump(channel)
return reply(1)
"""

#: One reporter's health verdicts.  ARGV: channel, reporter, vote TTL in
#: ms, quorum, then (node, 1 if down else 0, reason) triples.  Votes on
#: nodes the ring does not hold are ignored.
VOTE = _COMMON + r"""
if redis.call('EXISTS', meta) == 0 then return {-1} end
local channel, reporter, ttl, quorum = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local now = now_ms()
local changed = false
for i = 5, #ARGV - 2, 3 do
  local node = ARGV[i]
  if redis.call('HEXISTS', nodes, node) == 1 then
    local raw = redis.call('HGET', votes, node)
    local record = {}
    if raw then record = cjson.decode(raw) end
    record[reporter] = {tonumber(ARGV[i + 1]), now, ARGV[i + 2]}
    if settle(node, record, now, ttl, quorum) then changed = true end
  end
end
if changed then bump(channel) end
return reply(changed and 1 or 0)
"""

#: Expire old votes and re-decide every node, optionally withdrawing every
#: vote of one reporter first.  ARGV: channel, vote TTL in ms, quorum,
#: reporter to withdraw (empty for none).
SWEEP = _COMMON + r"""
if redis.call('EXISTS', meta) == 0 then return {-1} end
local channel, ttl, quorum, gone = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local now = now_ms()
local changed = false
local all = redis.call('HGETALL', votes)
for i = 1, #all, 2 do
  local node = all[i]
  if redis.call('HEXISTS', nodes, node) == 0 then
    redis.call('HDEL', votes, node)
  else
    local record = cjson.decode(all[i + 1])
    if gone ~= '' then record[gone] = nil end
    if settle(node, record, now, ttl, quorum) then changed = true end
  end
end
for _, node in ipairs(redis.call('HKEYS', down)) do
  if redis.call('HEXISTS', nodes, node) == 0 then
    redis.call('HDEL', down, node)
    changed = true
  elseif redis.call('HEXISTS', votes, node) == 0 then
    if settle(node, {}, now, ttl, quorum) then changed = true end
  end
end
if changed then bump(channel) end
return reply(changed and 1 or 0)
"""
