-- task_create: the requests bucket, the idempotency record, a hold of the price and the task,
-- unconfirmed (not listed, no queue entry, nothing charged: see Store.create_task), in one step.
-- KEYS: task, rate, idem, holds, hold_expiry, task_seq, fence, unconfirmed, wallet[, named]
--   named: the task an idempotency record names, once the caller knows it (see 'named')
-- ARGV: rpm, tpm, has_claim (0/1), fingerprint, reply_ttl_seconds, task_id, tenant, price,
--       hold_id, hold_seconds, idempotency scope, named task id ('' = none), key_id,
--       budget_units (-1: none), budget_period, then the task's static field, value pairs
-- Returns {outcome, available_units, requests_level, tokens_level, task fields}; {'conflict'}
-- when the task id is another tenant's; {'named', task_id} (nothing changed) when the record
-- names a task the caller did not pass: it calls again with that task's key.
if redis.call('EXISTS', KEYS[7]) == 1 then return {'abandoned', 0, '0', '0', {}} end
local rpm, tpm = tonumber(ARGV[1]), tonumber(ARGV[2])
local task_id, tenant, price = ARGV[6], ARGV[7], tonumber(ARGV[8])

local claimed = ARGV[3] == '1'
local rec = claimed and redis.call('HMGET', KEYS[3], 'fp', 'task') or {}
local named = nil
if rec[1] and rec[1] == ARGV[4] and rec[2] then
  if rec[2] == task_id then
    named = TASK
  elseif rec[2] == ARGV[12] then
    named = KEYS[10]
  else
    return {'named', rec[2]}
  end
end

local r, t = load_buckets(KEYS[2], rpm, tpm)
purge_holds(KEYS[4], KEYS[5])
local available = balance_units(KEYS[9]) - held_units(KEYS[4])

local function result(outcome, task)
  return {outcome, available, exact(r), exact(t), task or {}}
end

-- Every outcome but a rate limit takes one request; the tokens bucket stays as it is.
local function take()
  if rpm > 0 then r = r - 1 end
  save_buckets(KEYS[2], rpm, r, tpm, t)
end

if rpm > 0 and r < 1 then return result('rate_limited') end

if rec[1] then
  if rec[1] ~= ARGV[4] then
    take()
    return result('key_reused')
  end
  if named and redis.call('HEXISTS', named, 'unconfirmed') == 1 then
    take()
    return result('in_progress')
  end
  local task = named and redis.call('HGETALL', named) or {}
  if #task > 0 then
    take()
    return result('replay', task)
  end
end

-- This create sent again (a retried command): its task as it is, nothing held twice.
local owner = redis.call('HMGET', TASK, 'tenant', 'unconfirmed')
if owner[1] then
  if owner[1] ~= tenant then return {'conflict'} end
  take()
  return result(owner[2] and 'created' or 'replay', redis.call('HGETALL', TASK))
end

take()
if price > 0 and price > available then return result('insufficient_credits') end
local key_id, budget = ARGV[13], tonumber(ARGV[14])
if price > 0 and budget >= 0 then
  local room = budget - key_spent_units(KEYS[9], key_id, ARGV[15]) - key_held_units(KEYS[4], key_id)
  if price > room then return result('key_budget_exceeded') end
end

if price > 0 then place_hold(KEYS[4], KEYS[5], ARGV[9], price, tonumber(ARGV[10]), key_id) end
redis.call('HSET', KEYS[9], 'u:' .. key_id, NOW)
local seq = redis.call('INCR', KEYS[6])
redis.call('HSET', TASK, unpack(ARGV, 16))
redis.call('HSET', TASK, 'status', 'queued', 'created_at', NOW, 'seq', seq, 'attempts', 0,
  'refunded_units', 0, 'percent', 0, 'stage', 'queued', 'message', '', 'unconfirmed', 1,
  'idem', ARGV[11])
redis.call('ZADD', KEYS[8], NOW, task_id)
if claimed then
  -- Complete at once (the task is the reply): a duplicate arriving now is in progress, then
  -- a replay once the task is confirmed.
  redis.call('DEL', KEYS[3])
  redis.call('HSET', KEYS[3], 'fp', ARGV[4], 'task', task_id)
  redis.call('PEXPIRE', KEYS[3], tonumber(ARGV[5]) * 1000)
end
return result('created', redis.call('HGETALL', TASK))
