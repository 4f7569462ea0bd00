-- queue_drop: a queue entry done with (its task ended, or it was stale): out of the group's
-- pending list and out of the stream; the task's own entry is forgotten too.
-- KEYS: queue (stream), entries
-- ARGV: group, task_id, entry ('' = the task's own)
-- Returns 1 when an entry was dropped.
local own = redis.call('HGET', KEYS[2], ARGV[2])
local entry = ARGV[3]
if entry == '' then entry = own end
if not entry then return 0 end
redis.pcall('XACK', KEYS[1], ARGV[1], entry)  -- (no group: nothing pending)
redis.call('XDEL', KEYS[1], entry)
if own == entry then redis.call('HDEL', KEYS[2], ARGV[2]) end
return 1
