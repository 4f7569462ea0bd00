-- task_abandon: a create whose answer never came is undone. The id is fenced first (a create
-- still on its way takes nothing); an unconfirmed task goes whole: its hold, its record and
-- the idempotency record naming it (an unconfirmed task is in no listing). A confirmed task is
-- kept.
-- KEYS: task, holds, hold_expiry, unconfirmed, fence, tasks, idem
-- ARGV: tenant, hold_id, fence_seconds, task_id
-- Returns 'removed', 'kept' or 'absent'.
redis.call('SET', KEYS[5], '1', 'EX', ARGV[3])
local task_id = ARGV[4]
redis.call('ZREM', KEYS[4], task_id)
local st = redis.call('HMGET', TASK, 'tenant', 'unconfirmed')
if not st[1] then return 'absent' end
if st[1] ~= ARGV[1] or not st[2] then return 'kept' end
remove_hold(KEYS[2], KEYS[3], ARGV[2])
redis.call('DEL', TASK)
redis.call('ZREM', KEYS[6], task_id)
if redis.call('HGET', KEYS[7], 'task') == task_id then redis.call('DEL', KEYS[7]) end
return 'removed'
