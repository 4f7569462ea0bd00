-- key_rotate: a key's secret becomes a new one (same id, settings and spend); the old one
-- keeps finding the key until its grace ends (valid_until), a secret retired before goes now.
-- KEYS: index, current record, new record, previous record, tenant keys (zset)
-- ARGV: key_id, current hash, new hash, prefix, grace seconds, previous hash ('' = none)
-- Returns 'ok', 'moved' (the key's secret is not `current hash` any more) or 'revoked'.
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 'moved' end
if redis.call('HEXISTS', KEYS[2], 'revoked_at') == 1 then return 'revoked' end
local fields = redis.call('HGETALL', KEYS[2])
redis.call('DEL', KEYS[3])
redis.call('HSET', KEYS[3], unpack(fields))
redis.call('HSET', KEYS[3], 'prefix', ARGV[4])
redis.call('HDEL', KEYS[3], 'valid_until')
if ARGV[6] ~= '' then redis.call('DEL', KEYS[4]) end
local grace = tonumber(ARGV[5])
redis.call('HSET', KEYS[2], 'valid_until', NOW + grace)
redis.call('PEXPIRE', KEYS[2], math.ceil((grace + 86400) * 1000))
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3], ARGV[1] .. ':prev', ARGV[2])
local created = redis.call('ZSCORE', KEYS[5], ARGV[2]) or NOW
redis.call('ZREM', KEYS[5], ARGV[2])
redis.call('ZADD', KEYS[5], created, ARGV[3])
return 'ok'
