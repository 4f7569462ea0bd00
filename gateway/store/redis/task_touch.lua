-- task_touch: while `worker` runs the task, extend its lease and take its progress and/or its
-- rewritten input; otherwise change nothing. Returns the task fields ({} when unknown).
-- KEYS: task, open
-- ARGV: worker, lease_seconds, has_progress (0/1), percent, stage, message, has_input (0/1),
--       input (msgpack), recheck_seconds
local st = redis.call('HMGET', TASK, 'status', 'worker_id', 'task_id')
if not st[1] then return {} end
if st[1] == 'running' and st[2] == ARGV[1] then
  local lease_until = NOW + tonumber(ARGV[2])
  redis.call('HSET', TASK, 'lease_until', lease_until)
  if ARGV[3] == '1' then
    redis.call('HSET', TASK, 'percent', ARGV[4], 'stage', ARGV[5], 'message', ARGV[6])
  end
  if ARGV[7] == '1' then redis.call('HSET', TASK, 'input', ARGV[8]) end
  redis.call('ZADD', KEYS[2], 'XX', lease_until + tonumber(ARGV[9]), st[3])
end
return redis.call('HGETALL', TASK)
