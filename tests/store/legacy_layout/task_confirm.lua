-- task_confirm: an unconfirmed task's hold becomes its debit, the task is listed and queued
-- for workers, once; a task confirmed or canceled before is left as it is.
-- KEYS: task, queue, queued, holds, hold_expiry, unconfirmed, task_expiry, tenant_tasks
-- ARGV: group, wallet/ledger/order prefixes, tenant, hold_id, debit_id, index template,
--       retention (ms)
-- Returns the task fields ({} when there is no such task of this tenant: it was abandoned).
use_indexes(KEYS[7], ARGV[8], ARGV[9])
local st = redis.call('HMGET', TASK, 'tenant', 'unconfirmed', 'status', 'price_units',
  'task_id', 'request_id', 'capability', 'resolved_model')
local tenant = ARGV[5]
if st[1] ~= tenant then return {} end
if st[2] then
  remove_hold(KEYS[4], KEYS[5], ARGV[6])
  local price, task_id = tonumber(st[4]), st[5]
  if price > 0 and redis.call('HEXISTS', LEDGER .. tenant, ARGV[7]) == 0 then
    append_entry(WALLET .. tenant, LEDGER .. tenant, ORDER .. tenant, ARGV[7], tenant, 'debit',
      -price, st[7] .. ' ' .. st[8], task_id, st[6], st[8])
  end
  redis.call('HDEL', TASK, 'unconfirmed', 'idem')
  redis.call('ZREM', KEYS[6], task_id)
  redis.call('HSET', TASK, 'entry', redis.call('XADD', QUEUE, '*', 'task', task_id))
  redis.call('SADD', QUEUED, task_id)
  list_task(KEYS[8], 'queued')
end
return redis.call('HGETALL', TASK)
