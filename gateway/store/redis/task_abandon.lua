-- task_abandon: a create whose answer never came is undone. The id is fenced first (a create
-- still on its way takes nothing); an unconfirmed task goes whole: its hold, its record, its
-- place in the listing and the idempotency record naming it. A confirmed task is kept.
-- KEYS: task, queue, queued, holds, hold_expiry, unconfirmed, fence, tenant_tasks, idem,
--       task_expiry
-- ARGV: group, wallet/ledger/order prefixes, tenant, hold_id, fence_seconds, task_id,
--       index template, retention (ms)
-- Returns 'removed', 'kept' or 'absent'.
use_indexes(KEYS[10], ARGV[9], ARGV[10])
redis.call('SET', KEYS[7], '1', 'EX', ARGV[7])
local task_id = ARGV[8]
redis.call('ZREM', KEYS[6], task_id)
local st = redis.call('HMGET', TASK, 'tenant', 'unconfirmed')
if not st[1] then return 'absent' end
if st[1] ~= ARGV[5] or not st[2] then return 'kept' end
remove_hold(KEYS[4], KEYS[5], ARGV[6])
index_drop()
redis.call('DEL', TASK)
redis.call('ZREM', KEYS[8], task_id)
if redis.call('HGET', KEYS[9], 'task') == task_id then redis.call('DEL', KEYS[9]) end
return 'removed'
