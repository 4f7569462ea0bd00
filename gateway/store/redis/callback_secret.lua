-- callback_secret: a tenant's signing secret, made when it has none ('ensure') or replaced,
-- the one it replaces still sent for grace_seconds ('rotate').
-- KEYS: callback_secret
-- ARGV: mode, secret, grace_seconds
-- Returns the hash's fields.
local current = redis.call('HGET', KEYS[1], 'secret')
if ARGV[1] == 'rotate' and current then
  redis.call('HSET', KEYS[1], 'secret', ARGV[2], 'created_at', NOW, 'previous', current,
    'previous_until', NOW + tonumber(ARGV[3]))
elseif not current then
  redis.call('HSET', KEYS[1], 'secret', ARGV[2], 'created_at', NOW)
end
return redis.call('HGETALL', KEYS[1])
