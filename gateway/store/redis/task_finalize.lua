-- task_finalize: the terminal state and the refund, once per task; a terminal task is returned
-- unchanged, whatever this call says.
-- KEYS: task, open, task_expiry, wallet, ledger, ledger_order, then the 11 index zsets of
--       `capability`, callbacks_due
-- ARGV: status, refund_units, refund_id, reason, output, usage, warnings (msgpack),
--       has_error (0/1), error (msgpack), retention (ms), capability
-- Returns {'ok', task fields}, {'unknown'}, {'unconfirmed'}, {'too_much', price} or
-- {'capability', the task's}.
use_indexes(7, KEYS[3], ARGV[10])
use_callbacks(KEYS[18])
local st = redis.call('HMGET', TASK, 'status', 'price_units', 'unconfirmed', 'capability')
if not st[1] then return {'unknown'} end
if st[3] then return {'unconfirmed'} end  -- never charged nor claimed: nothing to end
if not TERMINAL[st[1]] then
  if st[4] ~= ARGV[11] then return {'capability', st[4]} end
  local refund, price = tonumber(ARGV[2]), tonumber(st[2])
  if refund > price then return {'too_much', price} end
  local extra = {'output', ARGV[5], 'usage', ARGV[6], 'warnings', ARGV[7]}
  if ARGV[8] == '1' then
    extra[#extra + 1] = 'error'
    extra[#extra + 1] = ARGV[9]
  end
  finish(ARGV[1], refund, ARGV[3], ARGV[4], extra, {KEYS[4], KEYS[5], KEYS[6]}, KEYS[2])
end
return {'ok', redis.call('HGETALL', TASK)}
