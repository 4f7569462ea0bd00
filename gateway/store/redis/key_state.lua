-- key_state: an API key's spend in the current period and its last use (Redis's clock).
-- KEYS: wallet
-- ARGV: key_id, period ('' = none)
local spent = 0
if ARGV[2] ~= '' then spent = key_spent_units(KEYS[1], ARGV[1], ARGV[2]) end
return {spent, redis.call('HGET', KEYS[1], 'u:' .. ARGV[1]) or ''}
