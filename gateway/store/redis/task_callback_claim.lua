-- task_callback_claim: a due callback delivery goes under a new lease: its schedule entry moves
-- to the lease's end (so it is claimed again only once the lease ran out) and the task's
-- callback gets the lease token that its attempt's outcome must show.
-- KEYS: task, callbacks_due
-- ARGV: task_id, lease_seconds, lease token
-- Returns {'claimed', task fields}, {'busy'} (not due: another claim took it) or {'gone'}.
local due = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not due or tonumber(due) > NOW then return {'busy'} end
if redis.call('HEXISTS', TASK, 'cb_url') == 0 then  -- the task left by retention
  redis.call('ZREM', KEYS[2], ARGV[1])
  return {'gone'}
end
local lease_until = NOW + tonumber(ARGV[2])
redis.call('ZADD', KEYS[2], lease_until, ARGV[1])
redis.call('HSET', TASK, 'cb_lease_token', ARGV[3], 'cb_lease_until', lease_until)
return {'claimed', redis.call('HGETALL', TASK)}
