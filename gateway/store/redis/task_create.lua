-- task_create: the requests bucket, the idempotency record, the debit, the queued task and its
-- queue entry, in one step (see Store.create_task).
-- KEYS: task, queue, queued, rate, idem, holds, hold_expiry, tenant_tasks, task_seq
-- ARGV: group, wallet/ledger/order prefixes, rpm, tpm, has_claim (0/1), fingerprint,
--       reply_ttl_seconds, task_id, tenant, price, debit_id, reason, request_id,
--       task key prefix, resolved model, then the task's static field, value pairs
-- Returns {outcome, available_units, requests_level, tokens_level, task fields}, or
-- {'conflict'} when the task id is another tenant's.
local rpm, tpm = tonumber(ARGV[5]), tonumber(ARGV[6])
local task_id, tenant, price = ARGV[10], ARGV[11], tonumber(ARGV[12])
local wallet, ledger = WALLET .. tenant, LEDGER .. tenant
local r, t = load_buckets(KEYS[4], rpm, tpm)
purge_holds(KEYS[6], KEYS[7])
local available = balance_units(wallet) - held_units(KEYS[6])

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
    local task = rec[2] and redis.call('HGETALL', ARGV[16] .. rec[2]) or {}
    if #task > 0 then
      take()
      return result('replay', task)
    end
  end
end

-- A retried create (same task id): the task as it is, never a second debit.
local owner = redis.call('HGET', TASK, 'tenant')
if owner then
  if owner ~= tenant then return {'conflict'} end
  take()
  return result('replay', redis.call('HGETALL', TASK))
end

take()
if price > 0 and price > available then return result('insufficient_credits') end

if price > 0 and redis.call('HEXISTS', ledger, ARGV[13]) == 0 then
  append_entry(wallet, ledger, ORDER .. tenant, ARGV[13], tenant, 'debit', -price, ARGV[14],
    task_id, ARGV[15], ARGV[17])
end
local seq = redis.call('INCR', KEYS[9])
local entry = redis.call('XADD', QUEUE, '*', 'task', task_id)
redis.call('HSET', TASK, unpack(ARGV, 18))
redis.call('HSET', TASK, 'status', 'queued', 'created_at', NOW, 'seq', seq, 'entry', entry,
  'attempts', 0, 'refunded_units', 0, 'percent', 0, 'stage', 'queued', 'message', '')
redis.call('ZADD', KEYS[8], seq, task_id)
redis.call('SADD', QUEUED, task_id)
if claimed then
  -- Complete at once (the task is the reply): a duplicate arriving now is a replay.
  redis.call('DEL', KEYS[5])
  redis.call('HSET', KEYS[5], 'fp', ARGV[8], 'task', task_id)
  redis.call('PEXPIRE', KEYS[5], tonumber(ARGV[9]) * 1000)
end
return result('created', redis.call('HGETALL', TASK))
