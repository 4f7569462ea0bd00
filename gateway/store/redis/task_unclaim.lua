-- task_unclaim: a claim whose answer was not sure (the replicas did not acknowledge it, or the
-- connection was lost) is taken back, so that it costs the task no attempt: a task still
-- running under that claim (its token) is queued again as it was before the claim.
-- KEYS: task, open, task_expiry, then the 11 index zsets of the task's capability
-- ARGV: claim token, retention (ms), recheck_seconds
-- Returns 1 when the claim was taken back; 0 when the task is not under it (the claim never
-- ran, a failover lost it, or it was over already).
use_indexes(4, KEYS[3], ARGV[2])
local st = redis.call('HMGET', TASK, 'status', 'claim', 'attempts', 'task_id')
if st[1] ~= 'running' or st[2] ~= ARGV[1] then return 0 end
local attempts = tonumber(st[3]) - 1
redis.call('HSET', TASK, 'status', 'queued', 'attempts', attempts, 'stage', 'queued')
redis.call('HDEL', TASK, 'worker_id', 'lease_until', 'claim')
if attempts <= 0 then redis.call('HDEL', TASK, 'started_at') end
index_move('running', 'queued')
redis.call('ZADD', KEYS[2], NOW + tonumber(ARGV[3]), st[4])
return 1
