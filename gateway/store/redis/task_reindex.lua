-- task_reindex: a task written before the listing indexes existed enters them as it is now, and
-- an ended one gets its retention (counted from `completed_at`); idempotent, so the backfill
-- may run again or beside any other script. An unconfirmed task is listed by no one.
-- KEYS: task, task_expiry, then the 11 index zsets of `capability`
-- ARGV: retention (ms), capability
-- Returns {'ok', 1}, {'ok', 0} when the task is gone or unconfirmed, or {'capability', the
-- task's}.
use_indexes(3, KEYS[2], ARGV[1])
local t = redis.call('HMGET', TASK, 'status', 'completed_at', 'capability', 'unconfirmed')
if not t[1] or t[4] then return {'ok', 0} end
if t[3] ~= ARGV[2] then return {'capability', t[3]} end
index_move(nil, t[1])
if TERMINAL[t[1]] and redis.call('PTTL', TASK) == -1 then
  local left = (tonumber(t[2] or NOW) - NOW) * 1000 + IX.ms
  retain_for(t[1], math.max(1, math.floor(left)))
end
return {'ok', 1}
