-- task_callback_redeliver: one more attempt of an ended task's callback, due now, same id. A
-- delivered, failed or disabled one is scheduled once (cb_once: its failure is final); one
-- still scheduled is made due now unless an attempt holds its lease.
-- KEYS: task, callbacks_due, callbacks_failed
-- ARGV: task_id, tenant
-- Returns {'ok', task fields} ({} when unknown or another tenant's).
local st = redis.call('HMGET', TASK, 'status', 'tenant', 'cb_url', 'cb_status', 'cb_lease_until')
if not st[1] or st[2] ~= ARGV[2] then return {'ok', {}} end
if st[3] and TERMINAL[st[1]] then
  if st[4] == 'pending' or st[4] == 'retrying' then
    if not st[5] or tonumber(st[5]) <= NOW then
      redis.call('HSET', TASK, 'cb_next_attempt_at', NOW)
      redis.call('ZADD', KEYS[2], NOW, ARGV[1])
    end
  else
    redis.call('HSET', TASK, 'cb_status', 'pending', 'cb_next_attempt_at', NOW, 'cb_once', 1)
    redis.call('ZADD', KEYS[2], NOW, ARGV[1])
    redis.call('ZREM', KEYS[3], ARGV[1])
  end
end
return {'ok', redis.call('HGETALL', TASK)}
