-- task_reindex: a task written before the listing indexes existed enters them as it is now, and
-- an ended one gets its retention (counted from `completed_at`); idempotent, so the backfill
-- may run again or beside any other script.
-- KEYS: task, queue, queued, task_expiry
-- ARGV: group, wallet/ledger/order prefixes, index template, retention (ms)
-- Returns 1, or 0 when the task is gone.
use_indexes(KEYS[4], ARGV[5], ARGV[6])
local t = redis.call('HMGET', TASK, 'status', 'completed_at')
if not t[1] then return 0 end
index_move(nil, t[1])
if TERMINAL[t[1]] and redis.call('PTTL', TASK) == -1 then
  local left = (tonumber(t[2] or NOW) - NOW) * 1000 + IX.ms
  retain_for(t[1], math.max(1, math.floor(left)))
end
return 1
