-- Helpers of the task scripts, prepended after common.lua by scripts.py.
-- Every task script starts the same way: KEYS task, queue (stream), queued (set); ARGV the
-- queue's consumer group and the key prefixes of wallets, ledgers and ledger orders (a task's
-- tenant is read from its hash, so its money keys are built here from those prefixes).
-- Scripts set the task's scalar fields; the msgpack ones (input, output...) come whole in ARGV.

local TASK, QUEUE, QUEUED = KEYS[1], KEYS[2], KEYS[3]
local GROUP, WALLET, LEDGER, ORDER = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local TERMINAL = {succeeded = true, failed = true, canceled = true}

-- A stream entry done with: out of the group's pending list and out of the stream.
local function dequeue(entry)
  if not entry then return end
  redis.call('XACK', QUEUE, GROUP, entry)
  redis.call('XDEL', QUEUE, entry)
end

-- The task's entry goes to `worker` with its idle time reset, at the moment its lease is set:
-- XAUTOCLAIM (idle >= lease) then finds only the entries of workers that stopped touching.
local function hold_entry(worker, entry)
  if entry then redis.pcall('XCLAIM', QUEUE, GROUP, worker, 0, entry, 'JUSTID') end
end

-- Listing indexes and retention (docs/store.md, "Task listing and retention"). Besides
-- `tenant_tasks`, a task is in three zsets scored by its seq: its tenant's tasks in its status,
-- of its capability, and in its status and of its capability (keys.py `task_indexes`). A script
-- that changes a task's status calls `use_indexes` first, with values from its own KEYS/ARGV:
-- keys.py's `task_expiry()`, `task_index_template()` and the retention in milliseconds.
local IX
local function use_indexes(expiry, template, retain_ms)
  IX = {expiry = expiry, template = template, ms = tonumber(retain_ms)}
end

-- The one place a script builds key names: an index zset, from keys.py's template ('' = any).
-- (A table's values replace the slots as they are: no pattern escapes in a tenant's name.)
local function index_key(tenant, status, capability)
  return (string.gsub(IX.template, '%z([tsc])', {t = tenant, s = status, c = capability}))
end

-- The task in TASK moves from status `from` to `to` in the indexes. nil is "in none":
-- `index_move(nil, s)` puts it in every index, `index_move(s, nil)` takes it out of every one.
-- Moving in also (re)adds it to its capability's zset, which no status change takes it out of:
-- so a task written before the indexes existed is in all of them after its next change.
local function index_move(from, to)
  if from == to then return end
  local t = redis.call('HMGET', TASK, 'task_id', 'tenant', 'capability', 'seq')
  if from then
    redis.call('ZREM', index_key(t[2], from, ''), t[1])
    redis.call('ZREM', index_key(t[2], from, t[3]), t[1])
  end
  if to then
    redis.call('ZADD', index_key(t[2], to, ''), t[4], t[1])
    redis.call('ZADD', index_key(t[2], to, t[3]), t[4], t[1])
    redis.call('ZADD', index_key(t[2], '', t[3]), t[4], t[1])
  else
    redis.call('ZREM', index_key(t[2], '', t[3]), t[1])
  end
end

-- A confirmed task enters the listing: its tenant's zset and the indexes of `status`.
local function list_task(tenant_tasks, status)
  local t = redis.call('HMGET', TASK, 'task_id', 'seq')
  redis.call('ZADD', tenant_tasks, t[2], t[1])
  index_move(nil, status)
end

-- The task in TASK leaves every index (an abandoned create; `tenant_tasks` is the caller's).
local function index_drop()
  index_move(redis.call('HGET', TASK, 'status'), nil)
end

-- An ended task (status `status`) expires in `ms` milliseconds: its hash by TTL, its index
-- entries by the sweep, which finds them through `task_expiry` (by time of expiry).
local function retain_for(status, ms)
  local t = redis.call('HMGET', TASK, 'task_id', 'tenant', 'capability')
  redis.call('PEXPIRE', TASK, ms)
  redis.call('ZADD', IX.expiry, NOW + ms / 1000, cmsgpack.pack({t[1], t[2], t[3], status}))
end

-- Make a task (not terminal yet) terminal, refund `refund` units once per task, dequeue it, move
-- it in the indexes and start its retention (`use_indexes` first). `extra`: more field, value
-- pairs to set.
local function finish(status, refund, refund_id, reason, extra)
  local t = redis.call('HMGET', TASK, 'task_id', 'tenant', 'entry', 'resolved_model', 'status')
  local fields = {'status', status, 'completed_at', NOW, 'stage', status, 'refunded_units', refund}
  if status == 'succeeded' then
    fields[#fields + 1] = 'percent'
    fields[#fields + 1] = 100
  end
  for i = 1, #extra do fields[#fields + 1] = extra[i] end
  redis.call('HSET', TASK, unpack(fields))
  index_move(t[5], status)
  retain_for(status, IX.ms)
  if refund > 0 and redis.call('HEXISTS', LEDGER .. t[2], refund_id) == 0 then
    append_entry(WALLET .. t[2], LEDGER .. t[2], ORDER .. t[2], refund_id, t[2], 'refund',
      refund, reason, t[1], '', t[4] or '')
  end
  redis.call('SREM', QUEUED, t[1])
  dequeue(t[3])
end
