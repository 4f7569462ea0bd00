-- release: a call that failed before it cost anything gives back its hold, its reserved tokens
-- (once, via the done marker, and only if its admission took them: marker 'a') and its
-- idempotency reservation.
-- KEYS: holds, hold_expiry, rate, idem, done
-- ARGV: hold_id, rpm, tpm, tokens_reserved, has_claim (0/1), call_id, done_ttl_seconds
remove_hold(KEYS[1], KEYS[2], ARGV[1])
local done = redis.call('GET', KEYS[5])
if done ~= '1' then redis.call('SET', KEYS[5], '1', 'EX', ARGV[7]) end

local rpm, tpm = tonumber(ARGV[2]), tonumber(ARGV[3])
local reserved = tonumber(ARGV[4])
if done == 'a' and tpm > 0 and reserved > 0 then
  local r, t = load_buckets(KEYS[3], rpm, tpm)
  save_buckets(KEYS[3], rpm, r, tpm, reconcile(t, tpm, math.min(reserved, tpm)))
end

if ARGV[5] == '1' then
  local rec = redis.call('HMGET', KEYS[4], 'call', 'reply')
  if rec[1] == ARGV[6] and not rec[2] then redis.call('DEL', KEYS[4]) end
end
return 1
