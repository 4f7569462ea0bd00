-- task_cancel: queued -> canceled now with a full refund; running -> cancel_requested_at (the
-- first time); terminal -> unchanged. Returns the task fields ({} when unknown or another's).
-- KEYS: task, queue, queued
-- ARGV: group, wallet/ledger/order prefixes, tenant, refund_id, refund reason
local st = redis.call('HMGET', TASK, 'status', 'tenant', 'price_units', 'cancel_requested_at')
if not st[1] or st[2] ~= ARGV[5] then return {} end
if st[1] == 'queued' then
  finish('canceled', tonumber(st[3]), ARGV[6], ARGV[7], {'cancel_requested_at', NOW})
elseif st[1] == 'running' and not st[4] then
  redis.call('HSET', TASK, 'cancel_requested_at', NOW)
end
return redis.call('HGETALL', TASK)
