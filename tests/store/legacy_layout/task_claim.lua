-- task_claim: a task brought by a queue entry (new, or a vanished worker's) starts running
-- under `worker`'s lease, if it is still queued or its lease ran out; out of attempts, it
-- fails with a full refund instead; terminal or gone, its entry is dropped.
-- KEYS: task, queue, queued, task_expiry
-- ARGV: group, wallet/ledger/order prefixes, entry, worker, lease_seconds, max_attempts,
--       refund_id, refund reason, error (msgpack), index template, retention (ms)
-- Returns {'claimed', task fields}, {'failed'}, {'busy'} (a live lease) or {'gone'}.
use_indexes(KEYS[4], ARGV[12], ARGV[13])
local st = redis.call('HMGET', TASK, 'status', 'lease_until', 'attempts', 'started_at', 'entry',
  'task_id', 'price_units')
if not st[1] or TERMINAL[st[1]] then
  dequeue(ARGV[5])
  return {'gone'}
end
if st[1] == 'running' and tonumber(st[2]) > NOW then return {'busy'} end

local attempts = tonumber(st[3])
if attempts >= tonumber(ARGV[8]) then
  finish('failed', tonumber(st[7]), ARGV[9], ARGV[10], {'error', ARGV[11]})
  return {'failed'}
end
if not st[4] then redis.call('HSET', TASK, 'started_at', NOW) end
redis.call('HSET', TASK, 'status', 'running', 'worker_id', ARGV[6],
  'lease_until', NOW + tonumber(ARGV[7]), 'attempts', attempts + 1, 'stage', 'running')
index_move(st[1], 'running')
redis.call('SREM', QUEUED, st[6])
hold_entry(ARGV[6], st[5])
return {'claimed', redis.call('HGETALL', TASK)}
