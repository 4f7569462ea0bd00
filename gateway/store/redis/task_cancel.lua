-- task_cancel: queued -> canceled now with a full refund (unconfirmed: canceled, its hold
-- released, nothing was charged); running -> cancel_requested_at (the first time); terminal ->
-- unchanged.
-- KEYS: task, holds, hold_expiry, unconfirmed, tasks, open, task_expiry, wallet, ledger,
--       ledger_order, then the 11 index zsets of `capability`,
--       callbacks_due
-- ARGV: tenant, refund_id, refund reason, hold_id, retention (ms), capability
-- Returns {'ok', task fields} ({} when unknown or another's) or {'capability', the task's}.
use_indexes(11, KEYS[7], ARGV[5])
use_callbacks(KEYS[22])
local st = redis.call('HMGET', TASK, 'status', 'tenant', 'price_units', 'cancel_requested_at',
  'unconfirmed', 'task_id', 'capability')
if not st[1] or st[2] ~= ARGV[1] then return {'ok', {}} end
if st[1] == 'queued' then
  if st[7] ~= ARGV[6] then return {'capability', st[7]} end
  local refund = tonumber(st[3])
  if st[5] then
    remove_hold(KEYS[2], KEYS[3], ARGV[4])
    redis.call('HDEL', TASK, 'unconfirmed', 'idem')
    redis.call('HSET', TASK, 'price_units', 0)  -- it was never charged
    redis.call('ZREM', KEYS[4], st[6])
    list_task(KEYS[5], 'queued')  -- (as it was, then moved to canceled below)
    refund = 0
  end
  finish('canceled', refund, ARGV[2], ARGV[3], {'cancel_requested_at', NOW},
    {KEYS[8], KEYS[9], KEYS[10]}, KEYS[6])
elseif st[1] == 'running' and not st[4] then
  redis.call('HSET', TASK, 'cancel_requested_at', NOW)
end
return {'ok', redis.call('HGETALL', TASK)}
