-- task_finalize: the terminal state and the refund, once per task; a terminal task is returned
-- unchanged, whatever this call says.
-- KEYS: task, queue, queued, task_expiry
-- ARGV: group, wallet/ledger/order prefixes, status, refund_units, refund_id, reason,
--       output, usage, warnings (msgpack), has_error (0/1), error (msgpack),
--       index template, retention (ms)
-- Returns {'ok', task fields}, {'unknown'}, {'unconfirmed'} or {'too_much', price}.
use_indexes(KEYS[4], ARGV[14], ARGV[15])
local st = redis.call('HMGET', TASK, 'status', 'price_units', 'unconfirmed')
if not st[1] then return {'unknown'} end
if st[3] then return {'unconfirmed'} end  -- never charged nor claimed: nothing to end
if not TERMINAL[st[1]] then
  local refund, price = tonumber(ARGV[6]), tonumber(st[2])
  if refund > price then return {'too_much', price} end
  local extra = {'output', ARGV[9], 'usage', ARGV[10], 'warnings', ARGV[11]}
  if ARGV[12] == '1' then
    extra[#extra + 1] = 'error'
    extra[#extra + 1] = ARGV[13]
  end
  finish(ARGV[5], refund, ARGV[7], ARGV[8], extra)
end
return {'ok', redis.call('HGETALL', TASK)}
