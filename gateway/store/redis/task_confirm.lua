-- task_confirm: an unconfirmed task's hold becomes its debit, the task is listed and marked
-- queued (in its tenant's open tasks; its queue entry is the caller's next step), once; a task
-- confirmed or canceled before is left as it is.
-- KEYS: task, holds, hold_expiry, unconfirmed, tasks, open, task_expiry, wallet, ledger,
--       ledger_order, then the 11 index zsets of `capability`
-- ARGV: tenant, hold_id, debit_id, capability, retention (ms), shard, recheck_seconds
-- Returns {'ok', task fields} ({} when there is no such task of this tenant: it was abandoned)
-- or {'capability', the task's} when the index keys were built for another capability.
use_indexes(11, KEYS[7], ARGV[5])
local st = redis.call('HMGET', TASK, 'tenant', 'unconfirmed', 'status', 'price_units',
  'task_id', 'request_id', 'capability', 'resolved_model', 'api_key_id')
local tenant = ARGV[1]
if st[1] ~= tenant then return {'ok', {}} end
if st[2] then
  if st[7] ~= ARGV[4] then return {'capability', st[7]} end
  remove_hold(KEYS[2], KEYS[3], ARGV[2])
  local price, task_id = tonumber(st[4]), st[5]
  if price > 0 and redis.call('HEXISTS', KEYS[9], ARGV[3]) == 0 then
    append_entry(KEYS[8], KEYS[9], KEYS[10], ARGV[3], tenant, 'debit', -price,
      st[7] .. ' ' .. st[8], task_id, st[6], st[8], st[9])
  end
  redis.call('HDEL', TASK, 'unconfirmed', 'idem')
  redis.call('HSET', TASK, 'shard', ARGV[6])
  redis.call('ZREM', KEYS[4], task_id)
  redis.call('ZADD', KEYS[6], NOW + tonumber(ARGV[7]), task_id)
  list_task(KEYS[5], 'queued')
end
return {'ok', redis.call('HGETALL', TASK)}
