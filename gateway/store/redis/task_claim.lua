-- task_claim: a task brought by a queue entry (new, or a vanished worker's) starts running
-- under `worker`'s lease, if it is still queued or its lease ran out; out of attempts, it
-- fails with a full refund instead. The entry was read in another slot: this step alone
-- decides whether the claim is valid (a duplicate or stale entry finds the task busy or gone).
-- KEYS: task, open, task_expiry, wallet, ledger, ledger_order, then the 11 index zsets of
--       `capability`, callbacks_due
-- ARGV: worker, lease_seconds, max_attempts, refund_id, refund reason, error (msgpack),
--       retention (ms), capability, recheck_seconds, claim token (kept as `claim`, so that
--       task_unclaim.lua can take back this claim and no other)
-- Returns {'claimed', task fields}, {'failed'}, {'busy', ms left of the lease}, {'gone'}
-- (unknown, unconfirmed or terminal: the entry can go) or {'capability', the task's}.
use_indexes(7, KEYS[3], ARGV[7])
use_callbacks(KEYS[18])
local st = redis.call('HMGET', TASK, 'status', 'lease_until', 'attempts', 'started_at',
  'task_id', 'price_units', 'unconfirmed', 'capability')
if not st[1] or TERMINAL[st[1]] or st[7] then return {'gone'} end
if st[8] ~= ARGV[8] then return {'capability', st[8]} end
if st[1] == 'running' and tonumber(st[2]) > NOW then
  return {'busy', math.floor((tonumber(st[2]) - NOW) * 1000)}
end

local attempts = tonumber(st[3])
if attempts >= tonumber(ARGV[3]) then
  finish('failed', tonumber(st[6]), ARGV[4], ARGV[5], {'error', ARGV[6]},
    {KEYS[4], KEYS[5], KEYS[6]}, KEYS[2])
  return {'failed'}
end
local lease_until = NOW + tonumber(ARGV[2])
if not st[4] then redis.call('HSET', TASK, 'started_at', NOW) end
redis.call('HSET', TASK, 'status', 'running', 'worker_id', ARGV[1], 'lease_until', lease_until,
  'attempts', attempts + 1, 'stage', 'running', 'claim', ARGV[10])
index_move(st[1], 'running')
redis.call('ZADD', KEYS[2], lease_until + tonumber(ARGV[9]), st[5])
return {'claimed', redis.call('HGETALL', TASK)}
