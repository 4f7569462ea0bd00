-- task_touch: while `worker` runs the task, extend its lease and take its progress and/or its
-- rewritten input; otherwise change nothing. Returns the task fields ({} when unknown).
-- KEYS: task, queue, queued
-- ARGV: group, wallet/ledger/order prefixes, worker, lease_seconds, has_progress (0/1),
--       percent, stage, message, has_input (0/1), input (msgpack)
local st = redis.call('HMGET', TASK, 'status', 'worker_id', 'entry')
if not st[1] then return {} end
if st[1] == 'running' and st[2] == ARGV[5] then
  redis.call('HSET', TASK, 'lease_until', NOW + tonumber(ARGV[6]))
  if ARGV[7] == '1' then
    redis.call('HSET', TASK, 'percent', ARGV[8], 'stage', ARGV[9], 'message', ARGV[10])
  end
  if ARGV[11] == '1' then redis.call('HSET', TASK, 'input', ARGV[12]) end
  hold_entry(ARGV[5], st[3])
end
return redis.call('HGETALL', TASK)
