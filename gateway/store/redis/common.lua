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

-- Expired holds stop counting: drop them and their units from the running total (and from
-- their key's, field kt:<key_id>, for a hold placed with a key: field k:<hold_id>).
local function purge_holds(hkey, xkey)
  while true do
    local gone = redis.call('ZRANGEBYSCORE', xkey, '-inf', NOW, 'LIMIT', 0, 200)
    if #gone == 0 then return end
    local amounts = redis.call('HMGET', hkey, unpack(gone))
    local owned = {}
    for i = 1, #gone do owned[i] = 'k:' .. gone[i] end
    local owners = redis.call('HMGET', hkey, unpack(owned))
    local sum = 0
    for i = 1, #amounts do
      if amounts[i] then
        sum = sum + tonumber(amounts[i])
        if owners[i] then redis.call('HINCRBY', hkey, 'kt:' .. owners[i], -tonumber(amounts[i])) end
      end
    end
    redis.call('HDEL', hkey, unpack(gone))
    redis.call('HDEL', hkey, unpack(owned))
    redis.call('ZREM', xkey, unpack(gone))
    if sum ~= 0 then redis.call('HINCRBY', hkey, 'total', -sum) end
  end
end

-- The unexpired holds placed with this API key (after purge_holds).
local function key_held_units(hkey, key_id)
  return tonumber(redis.call('HGET', hkey, 'kt:' .. key_id) or 0)
end

local function held_units(hkey)
  return tonumber(redis.call('HGET', hkey, 'total') or 0)
end

local function balance_units(wkey)
  return tonumber(redis.call('HGET', wkey, 'balance') or 0)
end

-- Place a hold once per id (a retried script must not count it twice). Both hold keys expire
-- together with the last hold in them, so a tenant that never returns leaves nothing behind.
local function place_hold(hkey, xkey, id, units, seconds, key_id)
  if redis.call('HSETNX', hkey, id, units) == 0 then return end
  redis.call('HINCRBY', hkey, 'total', units)
  if key_id and key_id ~= '' then
    redis.call('HSET', hkey, 'k:' .. id, key_id)
    redis.call('HINCRBY', hkey, 'kt:' .. key_id, units)
  end
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
  local owner = redis.call('HGET', hkey, 'k:' .. id)
  redis.call('HDEL', hkey, id, 'k:' .. id)
  redis.call('ZREM', xkey, id)
  redis.call('HINCRBY', hkey, 'total', -tonumber(units))
  if owner then redis.call('HINCRBY', hkey, 'kt:' .. owner, -tonumber(units)) end
end

-- The first day (days since 1970-01-01, UTC) of the calendar period `at` is in; 0 for
-- 'total'. gateway/store/periods.py computes the same (a month: civil date from day number).
local function period_start_day(period, at)
  if period == 'total' then return 0 end
  local day = math.floor(at / 86400)
  if period == 'day' then return day end
  if period == 'week' then return day - (day + 3) % 7 end
  local z = day + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524)
    - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  return day - (doy - math.floor((153 * mp + 2) / 5))
end

local PERIODS = {'day', 'week', 'month', 'total'}

-- A key's spend in the current `period`, kept in its tenant's wallet hash: field
-- s:<key_id>:<period> the units, S:<key_id>:<period> the period's first day (a past period
-- reads 0, and the next entry restarts it).
local function key_spent_units(wkey, key_id, period)
  local v = redis.call('HMGET', wkey, 's:' .. key_id .. ':' .. period, 'S:' .. key_id .. ':' .. period)
  if not v[1] or tonumber(v[2]) ~= period_start_day(period, NOW) then return 0 end
  return tonumber(v[1])
end

local function add_key_spend(wkey, key_id, units)
  for _, period in ipairs(PERIODS) do
    local start = period_start_day(period, NOW)
    local sf, pf = 's:' .. key_id .. ':' .. period, 'S:' .. key_id .. ':' .. period
    if tonumber(redis.call('HGET', wkey, pf)) == start then
      redis.call('HINCRBY', wkey, sf, units)
    else
      redis.call('HSET', wkey, sf, units, pf, start)
    end
  end
end

-- Append a ledger entry: the balance moves, the tenant's sequence numbers it for stable paging.
-- Entries are msgpack arrays: id, tenant, kind, amount, balance_after, created_at, reason,
-- task_id, request_id, model, key_id ('' = none); `_PackedEntry` in codec.py decodes them
-- (entries written before `model` existed have nine elements, before `key_id` ten). An entry of
-- a key moves that key's spend by the same amount.
local function append_entry(wkey, lkey, okey, id, tenant, kind, amount, reason, task_id, request_id,
                            model, key_id)
  local balance = redis.call('HINCRBY', wkey, 'balance', amount)
  local seq = redis.call('HINCRBY', wkey, 'seq', 1)
  local entry = cmsgpack.pack({id, tenant, kind, amount, balance, NOW, reason, task_id, request_id,
    model or '', key_id or ''})
  if key_id and key_id ~= '' then add_key_spend(wkey, key_id, -amount) end
  redis.call('HSET', lkey, id, entry)
  redis.call('ZADD', okey, seq, id)
  return entry, balance
end
