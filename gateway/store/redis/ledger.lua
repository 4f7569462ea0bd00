-- ledger: one page, newest first, strictly older than the entry `after` (by sequence number).
-- KEYS: ledger, ledger_order
-- ARGV: limit, after ('' = from the newest)
-- Returns {has_more, entry...}; an unknown `after` gives an empty page.
local limit = tonumber(ARGV[1])
local top = '+inf'
if ARGV[2] ~= '' then
  local seq = redis.call('ZSCORE', KEYS[2], ARGV[2])
  if not seq then return {0} end
  top = '(' .. seq
end
local ids = redis.call('ZREVRANGEBYSCORE', KEYS[2], top, '-inf', 'LIMIT', 0, limit + 1)
local more = 0
if #ids > limit then
  more = 1
  ids[#ids] = nil
end
if #ids == 0 then return {more} end
local page = redis.call('HMGET', KEYS[1], unpack(ids))
table.insert(page, 1, more)
return page
