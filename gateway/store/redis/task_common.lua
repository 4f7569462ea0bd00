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

-- Make a task (not terminal yet) terminal, refund `refund` units once per task, dequeue it.
-- `extra`: more field, value pairs to set.
local function finish(status, refund, refund_id, reason, extra)
  local t = redis.call('HMGET', TASK, 'task_id', 'tenant', 'entry', 'resolved_model')
  local fields = {'status', status, 'completed_at', NOW, 'stage', status, 'refunded_units', refund}
  if status == 'succeeded' then
    fields[#fields + 1] = 'percent'
    fields[#fields + 1] = 100
  end
  for i = 1, #extra do fields[#fields + 1] = extra[i] end
  redis.call('HSET', TASK, unpack(fields))
  if refund > 0 and redis.call('HEXISTS', LEDGER .. t[2], refund_id) == 0 then
    append_entry(WALLET .. t[2], LEDGER .. t[2], ORDER .. t[2], refund_id, t[2], 'refund',
      refund, reason, t[1], '', t[4] or '')
  end
  redis.call('SREM', QUEUED, t[1])
  dequeue(t[3])
end
