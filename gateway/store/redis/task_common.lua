-- Helpers of the task scripts, prepended after common.lua by scripts.py. Every key a script
-- touches is one of its KEYS, all of the task's tenant (one hash slot: keys.py); KEYS[1] is the
-- task. Scripts set the task's scalar fields; the msgpack ones (input, output...) come whole in
-- ARGV. The task's queue entry lives in another slot (its queue shard): the callers add and
-- remove it in a step of their own (queue_add.lua, queue_drop.lua).

local TASK = KEYS[1]
local TERMINAL = {succeeded = true, failed = true, canceled = true}
local STATUS_AT = {queued = 0, running = 1, succeeded = 2, failed = 3, canceled = 4}

-- Listing indexes and retention (docs/store.md, "Task listing and retention"). Besides the
-- tenant's `tasks` zset, a task is in three zsets scored by its seq: its tenant's tasks in its
-- status, of its capability, and in its status and of its capability. A script that changes a
-- task's status declares the 11 index zsets of the task's capability from KEYS[first] (keys.py
-- `task_index_block`: by status, by status and capability, by capability), and the tenant's
-- expiry zset; `use_indexes` takes them, with the retention in milliseconds. The caller built
-- them for a capability it names: `same_capability` says whether that is the task's.
local IX
local function use_indexes(first, expiry, retain_ms)
  IX = {first = first, expiry = expiry, ms = tonumber(retain_ms)}
end

local function same_capability(capability)
  return redis.call('HGET', TASK, 'capability') == capability
end

local function by_status(status)
  return KEYS[IX.first + STATUS_AT[status]]
end

local function by_both(status)
  return KEYS[IX.first + 5 + STATUS_AT[status]]
end

-- The task moves from status `from` to `to` in the indexes. nil is "in none": `index_move(nil,
-- s)` puts it in every index, `index_move(s, nil)` takes it out of every one. Moving in also
-- (re)adds it to its capability's zset, which no status change takes it out of.
local function index_move(from, to)
  if from == to then return end
  local t = redis.call('HMGET', TASK, 'task_id', 'seq')
  if from then
    redis.call('ZREM', by_status(from), t[1])
    redis.call('ZREM', by_both(from), t[1])
  end
  if to then
    redis.call('ZADD', by_status(to), t[2], t[1])
    redis.call('ZADD', by_both(to), t[2], t[1])
    redis.call('ZADD', KEYS[IX.first + 10], t[2], t[1])
  else
    redis.call('ZREM', KEYS[IX.first + 10], t[1])
  end
end

-- Task callbacks: a script that may end a task declares its tenant's `callbacks_due` zset (the
-- delivery schedule) with `use_callbacks`, so `finish` schedules the callback of a task that has
-- one, due now, in the same step (the hash's `cb_*` fields are the callback's state).
local CB_DUE
local function use_callbacks(key)
  CB_DUE = key
end

-- A confirmed task enters the listing: its tenant's zset and the indexes of `status`.
local function list_task(tenant_tasks, status)
  local t = redis.call('HMGET', TASK, 'task_id', 'seq')
  redis.call('ZADD', tenant_tasks, t[2], t[1])
  index_move(nil, status)
end

-- An ended task (status `status`) expires in `ms` milliseconds: its hash by TTL, its index
-- entries by the sweep, which finds them through the tenant's expiry zset (by time of expiry).
local function retain_for(status, ms)
  local t = redis.call('HMGET', TASK, 'task_id', 'tenant', 'capability')
  redis.call('PEXPIRE', TASK, ms)
  redis.call('ZADD', IX.expiry, NOW + ms / 1000, cmsgpack.pack({t[1], t[2], t[3], status}))
end

-- Make a task (not terminal yet) terminal, refund `refund` units once per task, move it in the
-- indexes, start its retention (`use_indexes` first) and take it out of the tenant's open tasks.
-- `extra`: more field, value pairs to set; `money`: {wallet, ledger, ledger_order}.
local function finish(status, refund, refund_id, reason, extra, money, open)
  local t = redis.call('HMGET', TASK, 'task_id', 'tenant', 'resolved_model', 'status', 'api_key_id')
  local fields = {'status', status, 'completed_at', NOW, 'stage', status, 'refunded_units', refund}
  if status == 'succeeded' then
    fields[#fields + 1] = 'percent'
    fields[#fields + 1] = 100
  end
  for i = 1, #extra do fields[#fields + 1] = extra[i] end
  redis.call('HSET', TASK, unpack(fields))
  if redis.call('HEXISTS', TASK, 'cb_url') == 1 then
    redis.call('HSET', TASK, 'cb_status', 'pending', 'cb_next_attempt_at', NOW)
    redis.call('ZADD', CB_DUE, NOW, t[1])
  end
  index_move(t[4], status)
  retain_for(status, IX.ms)
  if refund > 0 and redis.call('HEXISTS', money[2], refund_id) == 0 then
    append_entry(money[1], money[2], money[3], refund_id, t[2], 'refund', refund, reason, t[1], '',
      t[3] or '', t[5] or '')
  end
  redis.call('ZREM', open, t[1])
end
