-- task_callback_record: an attempt's outcome, applied only under the lease token it was claimed
-- with: attempt_count + 1, the status, and the schedule (again at next_attempt_at when
-- retrying; else off it, failed and disabled ones into callbacks_failed, its latest 1000). A
-- redelivery (cb_once) that fails is failed, not retried.
-- KEYS: task, callbacks_due, callbacks_failed
-- ARGV: task_id, lease token, status, next_attempt_at, last_error ('' = none)
-- Returns {'ok', task fields} or {'stale'}.
local cb = redis.call('HMGET', TASK, 'cb_lease_token', 'cb_once')
if cb[1] ~= ARGV[2] then return {'stale'} end
local status = ARGV[3]
if status == 'retrying' and cb[2] then status = 'failed' end
redis.call('HINCRBY', TASK, 'cb_attempt_count', 1)
redis.call('HDEL', TASK, 'cb_lease_token', 'cb_lease_until', 'cb_next_attempt_at', 'cb_last_error')
redis.call('HSET', TASK, 'cb_status', status)
if ARGV[5] ~= '' and status ~= 'delivered' then
  redis.call('HSET', TASK, 'cb_last_error', ARGV[5])
end
if status == 'retrying' then
  redis.call('HSET', TASK, 'cb_next_attempt_at', ARGV[4])
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
else
  redis.call('HDEL', TASK, 'cb_once')
  redis.call('ZREM', KEYS[2], ARGV[1])
  if status == 'delivered' then
    redis.call('HSET', TASK, 'cb_delivered_at', NOW)
    redis.call('ZREM', KEYS[3], ARGV[1])
  else
    redis.call('ZADD', KEYS[3], NOW, ARGV[1])
    redis.call('ZREMRANGEBYRANK', KEYS[3], 0, -1001)  -- the tenant's latest 1000 are listed
  end
end
return {'ok', redis.call('HGETALL', TASK)}
