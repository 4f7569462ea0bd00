-- grant: append a ledger entry once per entry id; a repeat returns the first entry unchanged.
-- KEYS: wallet, ledger, ledger_order
-- ARGV: entry_id, tenant, kind, amount_units, reason
local existing = redis.call('HGET', KEYS[2], ARGV[1])
if existing then return existing end
local entry = append_entry(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3],
  tonumber(ARGV[4]), ARGV[5], '', '', '')
return entry
