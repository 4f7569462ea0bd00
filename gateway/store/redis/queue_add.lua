-- queue_add: a queued task's entry in its queue shard, once: a second call while the entry is in
-- the stream returns it unchanged (confirm retried, or the reconcile), so no task is queued
-- twice; an entry gone from the stream (a failover lost it) is added again. The group is made
-- with the stream.
-- KEYS: queue (stream), entries (hash task_id -> entry id)
-- ARGV: group, task_id, tenant, capability
-- Returns {1, entry} when added, {0, entry} when it was there.
local entry = redis.call('HGET', KEYS[2], ARGV[2])
if entry and #redis.call('XRANGE', KEYS[1], entry, entry) > 0 then return {0, entry} end
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('XGROUP', 'CREATE', KEYS[1], ARGV[1], '0', 'MKSTREAM')
end
entry = redis.call('XADD', KEYS[1], '*', 'task', ARGV[2], 'tenant', ARGV[3], 'capability',
  ARGV[4])
redis.call('HSET', KEYS[2], ARGV[2], entry)
return {1, entry}
