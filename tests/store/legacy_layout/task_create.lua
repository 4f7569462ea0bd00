-- task_create: the requests bucket, the idempotency record, a hold of the price and the task,
-- unconfirmed (no queue entry, nothing charged: see Store.create_task), in one step.
-- KEYS: task, queue, queued, rate, idem, holds, hold_expiry, task_seq, fence, unconfirmed
-- (the listing and its indexes take the task at confirmation: an unconfirmed task is only
-- found by its id)
-- ARGV: group, wallet/ledger/order prefixes, rpm, tpm, has_claim (0/1), fingerprint,
--       reply_ttl_seconds, task_id, tenant, price, hold_id, hold_seconds, task key prefix,
--       idempotency scope, then the task's static field, value pairs
-- Returns {outcome, available_units, requests_level, tokens_level, task fields}, or
-- {'conflict'} when the task id is another tenant's.
if redis.call('EXISTS', KEYS[9]) == 1 then return {'abandoned', 0, '0', '0', {}} end
local rpm, tpm = tonumber(ARGV[5]), tonumber(ARGV[6])
local task_id, tenant, price = ARGV[10], ARGV[11], tonumber(ARGV[12])
local r, t = load_buckets(KEYS[4], rpm, tpm)
purge_holds(KEYS[6], KEYS[7])
local available = balance_units(WALLET .. tenant) - held_units(KEYS[6])

local function result(outcome, task)
  return {outcome, available, exact(r), exact(t), task or {}}
end

-- Every outcome but a rate limit takes one request; the tokens bucket stays as it is.
local function take()
  if rpm > 0 then r = r - 1 end
  save_buckets(KEYS[4], rpm, r, tpm, t)
end

if rpm > 0 and r < 1 then return result('rate_limited') end

local claimed = ARGV[7] == '1'
if claimed then
  local rec = redis.call('HMGET', KEYS[5], 'fp', 'task')
  if rec[1] then
    if rec[1] ~= ARGV[8] then
      take()
      return result('key_reused')
    end
    local named = rec[2] and ARGV[15] .. rec[2]
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

if price > 0 then place_hold(KEYS[6], KEYS[7], ARGV[13], price, tonumber(ARGV[14])) end
local seq = redis.call('INCR', KEYS[8])
redis.call('HSET', TASK, unpack(ARGV, 17))
redis.call('HSET', TASK, 'status', 'queued', 'created_at', NOW, 'seq', seq, 'attempts', 0,
  'refunded_units', 0, 'percent', 0, 'stage', 'queued', 'message', '', 'unconfirmed', 1,
  'idem', ARGV[16])
redis.call('ZADD', KEYS[10], NOW, task_id)
if claimed then
  -- Complete at once (the task is the reply): a duplicate arriving now is in progress, then
  -- a replay once the task is confirmed.
  redis.call('DEL', KEYS[5])
  redis.call('HSET', KEYS[5], 'fp', ARGV[8], 'task', task_id)
  redis.call('PEXPIRE', KEYS[5], tonumber(ARGV[9]) * 1000)
end
return result('created', redis.call('HGETALL', TASK))
