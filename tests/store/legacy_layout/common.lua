-- Helpers prepended to every script by scripts.py (one chunk, so these are plain locals).
-- Time is Redis server time: every gateway replica sharing this Redis agrees on it.

local TIME = redis.call('TIME')
local NOW = tonumber(TIME[1]) + tonumber(TIME[2]) / 1000000

-- Level of a token bucket now: never seen = full; refills continuously at cap/60 per second
-- up to cap (which also clamps a bucket whose limit was lowered). It may be negative after a
-- call used more tokens than it reserved.
local function refill(level, at, cap)
  if not level then return cap end
  local l = tonumber(level) + math.max(0, NOW - tonumber(at)) * cap / 60
  if l > cap then l = cap end
  return l
end

local function seconds_to_full(level, cap)
  if cap <= 0 or level >= cap then return 0 end
  return (cap - level) * 60 / cap
end

-- Both buckets of an API key, refilled to NOW (limit 0 = bucket off).
local function load_buckets(key, rpm, tpm)
  local b = redis.call('HMGET', key, 'r', 'rt', 't', 'tt')
  return refill(b[1], b[2], rpm), refill(b[3], b[4], tpm)
end

-- Store the buckets that are on. The key lives until both would be full again: an absent key
-- reads as full, so expiring it then changes nothing.
local function save_buckets(key, rpm, r, tpm, t)
  local ttl = -1
  if rpm > 0 then
    redis.call('HSET', key, 'r', r, 'rt', NOW)
    ttl = seconds_to_full(r, rpm)
  end
  if tpm > 0 then
    redis.call('HSET', key, 't', t, 'tt', NOW)
    ttl = math.max(ttl, seconds_to_full(t, tpm))
  end
  if ttl >= 0 then redis.call('PEXPIRE', key, math.ceil(ttl * 1000) + 1000) end
end

-- Give reserved tokens back (never above capacity) or take what was used beyond them.
local function reconcile(t, tpm, delta)
  if delta > 0 then return math.min(tpm, t + delta) end
  return t + delta
end

local function exact(x)
  return string.format('%.17g', x)
end

-- Expired holds stop counting: drop them and their units from the running total.
local function purge_holds(hkey, xkey)
  while true do
    local gone = redis.call('ZRANGEBYSCORE', xkey, '-inf', NOW, 'LIMIT', 0, 200)
    if #gone == 0 then return end
    local amounts = redis.call('HMGET', hkey, unpack(gone))
    local sum = 0
    for i = 1, #amounts do
      if amounts[i] then sum = sum + tonumber(amounts[i]) end
    end
    redis.call('HDEL', hkey, unpack(gone))
    redis.call('ZREM', xkey, unpack(gone))
    if sum ~= 0 then redis.call('HINCRBY', hkey, 'total', -sum) end
  end
end

local function held_units(hkey)
  return tonumber(redis.call('HGET', hkey, 'total') or 0)
end

local function balance_units(wkey)
  return tonumber(redis.call('HGET', wkey, 'balance') or 0)
end

-- Place a hold once per id (a retried script must not count it twice). Both hold keys expire
-- together with the last hold in them, so a tenant that never returns leaves nothing behind.
local function place_hold(hkey, xkey, id, units, seconds)
  if redis.call('HSETNX', hkey, id, units) == 0 then return end
  redis.call('HINCRBY', hkey, 'total', units)
  redis.call('ZADD', xkey, NOW + seconds, id)
  local ms = seconds * 1000 + 1000
  if redis.call('PTTL', hkey) < ms then
    redis.call('PEXPIRE', hkey, ms)
    redis.call('PEXPIRE', xkey, ms)
  end
end

local function remove_hold(hkey, xkey, id)
  local units = redis.call('HGET', hkey, id)
  if not units then return end
  redis.call('HDEL', hkey, id)
  redis.call('ZREM', xkey, id)
  redis.call('HINCRBY', hkey, 'total', -tonumber(units))
end

-- Append a ledger entry: the balance moves, the tenant's sequence numbers it for stable paging.
-- Entries are msgpack arrays: id, tenant, kind, amount, balance_after, created_at, reason,
-- task_id, request_id, model ('' = none); `_PackedEntry` in codec.py decodes them (entries
-- written before `model` existed have nine elements).
local function append_entry(wkey, lkey, okey, id, tenant, kind, amount, reason, task_id, request_id,
                            model)
  local balance = redis.call('HINCRBY', wkey, 'balance', amount)
  local seq = redis.call('HINCRBY', wkey, 'seq', 1)
  local entry = cmsgpack.pack({id, tenant, kind, amount, balance, NOW, reason, task_id, request_id,
    model or ''})
  redis.call('HSET', lkey, id, entry)
  redis.call('ZADD', okey, seq, id)
  return entry, balance
end
