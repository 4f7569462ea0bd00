-- ledger_range: one page, oldest first, of the entries stamped from `since` up to `until`.
-- KEYS: ledger, ledger_order
-- ARGV: since, until, limit, after ('' = from the first entry stamped at or after `since`)
-- Returns {has_more, entry...}; an unknown `after` gives an empty page.
-- Entries are stamped in sequence order (Redis's clock, one script at a time), so the first
-- one is found by bisecting the order by rank: O(log n) lookups, never a scan of the ledger.
local since, till, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])

local function stamp(packed)
  return cmsgpack.unpack(packed)[6]
end

local start
if ARGV[4] ~= '' then
  local rank = redis.call('ZRANK', KEYS[2], ARGV[4])
  if not rank then return {0} end
  start = rank + 1
else
  local low, high = 0, redis.call('ZCARD', KEYS[2])
  while low < high do
    local middle = math.floor((low + high) / 2)
    local id = redis.call('ZRANGE', KEYS[2], middle, middle)[1]
    if stamp(redis.call('HGET', KEYS[1], id)) < since then low = middle + 1 else high = middle end
  end
  start = low
end

local ids = redis.call('ZRANGE', KEYS[2], start, start + limit)
local page = {0}
if #ids == 0 then return page end
local entries = redis.call('HMGET', KEYS[1], unpack(ids))
for i = 1, #entries do
  if stamp(entries[i]) >= till then break end
  if i > limit then
    page[1] = 1
    break
  end
  page[#page + 1] = entries[i]
end
return page
