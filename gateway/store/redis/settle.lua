-- settle: the hold becomes the charge, tokens are reconciled, the reply is kept. Idempotent per
-- call: the charge entry id is unique, the done marker makes the reconcile happen once.
-- KEYS: holds, hold_expiry, wallet, ledger, ledger_order, rate, idem, done
-- ARGV: hold_id, charge_units, entry_id, tenant, reason, request_id, rpm, tpm, tokens_reserved,
--       tokens_used, idem_mode (0 none, 1 drop in-flight, 2 store reply), fingerprint, call_id,
--       reply, reply_ttl_seconds, done_ttl_seconds, model, key_id
-- Returns the balance after.
remove_hold(KEYS[1], KEYS[2], ARGV[1])
local first = redis.call('GET', KEYS[8]) ~= '1'  -- nothing yet, or 'a' (admitted with tokens)
if first then redis.call('SET', KEYS[8], '1', 'EX', ARGV[16]) end

local charge = tonumber(ARGV[2])
if charge > 0 and redis.call('HEXISTS', KEYS[4], ARGV[3]) == 0 then
  append_entry(KEYS[3], KEYS[4], KEYS[5], ARGV[3], ARGV[4], 'charge', -charge, ARGV[5], '', ARGV[6],
    ARGV[17], ARGV[18])
end

local rpm, tpm = tonumber(ARGV[7]), tonumber(ARGV[8])
if first and tpm > 0 then
  local r, t = load_buckets(KEYS[6], rpm, tpm)
  t = reconcile(t, tpm, math.min(tonumber(ARGV[9]), tpm) - tonumber(ARGV[10]))
  save_buckets(KEYS[6], rpm, r, tpm, t)
end

local mode = ARGV[11]
if mode ~= '0' then
  local rec = redis.call('HMGET', KEYS[7], 'call', 'reply')
  local mine = rec[1] == ARGV[13]
  if mode == '2' then
    -- First completion wins: never overwrite a record another call now owns.
    if not rec[1] or mine then
      redis.call('HSET', KEYS[7], 'fp', ARGV[12], 'call', ARGV[13], 'reply', ARGV[14])
      redis.call('PEXPIRE', KEYS[7], tonumber(ARGV[15]) * 1000)
    end
  elseif mine and not rec[2] then
    redis.call('DEL', KEYS[7])
  end
end
return balance_units(KEYS[3])
