-- admit: rate limits, idempotency reservation and credit hold in one atomic step.
-- KEYS: rate, idem, holds, hold_expiry, wallet, done
-- ARGV: rpm, tpm, tokens, hold_units, hold_seconds, has_claim (0/1), fingerprint,
--       hold_id, lease_seconds, call_id, done_ttl_seconds, min_hold_units, min_tokens,
--       key_id, budget_units (-1: the key has no budget), budget_period
-- Returns {outcome, available_units, requests_level, tokens_level, held_units (0 unless
-- admitted), tokens (the reservation taken, or that a refusal was measured by)[, reply]}.
-- A wallet-bounded hold (0 < min_hold_units < hold_units) that the wallet cannot cover whole
-- but covers down to its minimum holds all that is available, and reserves tokens in
-- proportion (gateway/store/holds.py does the same sums for SQLite). A key with a budget
-- bounds the hold the same way by what is left of it this period (its spend and its holds):
-- a hold the wallet covers but the budget does not is 'key_budget_exceeded'.
-- A call already released (its caller gave up on this admission) takes nothing. A call that
-- takes tokens marks its done key 'a': only then does its release give tokens back.
if redis.call('EXISTS', KEYS[6]) == 1 then return {'abandoned', 0, '0', '0', 0, 0} end
local rpm, tpm = tonumber(ARGV[1]), tonumber(ARGV[2])
local r, t = load_buckets(KEYS[1], rpm, tpm)
purge_holds(KEYS[3], KEYS[4])
local available = balance_units(KEYS[5]) - held_units(KEYS[3])

local hold, min_hold = tonumber(ARGV[4]), tonumber(ARGV[12])
local tokens = tonumber(ARGV[3])
local function grant(room)
  if hold <= 0 or hold <= room then return hold end
  if min_hold > 0 and min_hold < hold and min_hold <= room then return room end
  return 0
end
local granted = grant(available)
local key_id, budget = ARGV[14], tonumber(ARGV[15])
local over_budget = false
if budget >= 0 and granted > 0 then
  local room = budget - key_spent_units(KEYS[5], key_id, ARGV[16]) - key_held_units(KEYS[3], key_id)
  granted = grant(math.min(available, room))
  over_budget = granted == 0
end
if granted > 0 and granted < hold then
  local min_tokens = tonumber(ARGV[13])
  if min_tokens < tokens then
    local share = (granted - min_hold) * (tokens - min_tokens) / (hold - min_hold)
    tokens = min_tokens + math.floor(share)
  end
end

local function result(outcome, reply)
  local held = 0
  if outcome == 'admitted' then held = granted end
  return {outcome, available, exact(r), exact(t), held, tokens, reply}
end

if rpm > 0 and r < 1 then return result('rate_limited') end

local claimed = ARGV[6] == '1'
if claimed then
  local rec = redis.call('HMGET', KEYS[2], 'fp', 'call', 'reply')
  if rec[1] then
    if rpm > 0 then r = r - 1 end
    save_buckets(KEYS[1], rpm, r, tpm, t)
    if rec[1] ~= ARGV[7] then return result('key_reused') end
    if rec[3] then return result('replay', rec[3]) end
    return result('in_progress')
  end
end

local need = 0
if tpm > 0 then
  need = math.min(tokens, tpm)
  if t < need then return result('rate_limited') end
end

if hold > 0 and granted == 0 then
  if rpm > 0 then r = r - 1 end
  save_buckets(KEYS[1], rpm, r, tpm, t)
  if over_budget then return result('key_budget_exceeded') end
  return result('insufficient_credits')
end

if rpm > 0 then r = r - 1 end
t = t - need
save_buckets(KEYS[1], rpm, r, tpm, t)
if need > 0 then redis.call('SET', KEYS[6], 'a', 'EX', ARGV[11]) end
local hold_seconds = tonumber(ARGV[5])
if granted > 0 and hold_seconds > 0 then
  place_hold(KEYS[3], KEYS[4], ARGV[8], granted, hold_seconds, key_id)
end
redis.call('HSET', KEYS[5], 'u:' .. key_id, NOW)
if claimed then
  redis.call('HSET', KEYS[2], 'fp', ARGV[7], 'call', ARGV[10])
  redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[9]) * 1000)
end
return result('admitted')
