-- task_cancel: queued -> canceled now with a full refund (unconfirmed: canceled, its hold
-- released, nothing was charged); running -> cancel_requested_at (the first time); terminal ->
-- unchanged. Returns the task fields ({} when unknown or another's).
-- KEYS: task, queue, queued, holds, hold_expiry, unconfirmed, task_expiry, tenant_tasks
-- ARGV: group, wallet/ledger/order prefixes, tenant, refund_id, refund reason, hold_id,
--       index template, retention (ms)
use_indexes(KEYS[7], ARGV[9], ARGV[10])
local st = redis.call('HMGET', TASK, 'status', 'tenant', 'price_units', 'cancel_requested_at',
  'unconfirmed', 'task_id')
if not st[1] or st[2] ~= ARGV[5] then return {} end
if st[1] == 'queued' then
  local refund = tonumber(st[3])
  if st[5] then
    remove_hold(KEYS[4], KEYS[5], ARGV[8])
    redis.call('HDEL', TASK, 'unconfirmed', 'idem')
    redis.call('HSET', TASK, 'price_units', 0)  -- it was never charged
    redis.call('ZREM', KEYS[6], st[6])
    list_task(KEYS[8], 'queued')  -- (as it was, then moved to canceled below)
    refund = 0
  end
  finish('canceled', refund, ARGV[6], ARGV[7], {'cancel_requested_at', NOW})
elseif st[1] == 'running' and not st[4] then
  redis.call('HSET', TASK, 'cancel_requested_at', NOW)
end
return redis.call('HGETALL', TASK)
