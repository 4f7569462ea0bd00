-- wallet: balance and the units of holds still active (expired ones are purged first).
-- KEYS: holds, hold_expiry, wallet
purge_holds(KEYS[1], KEYS[2])
return {balance_units(KEYS[3]), held_units(KEYS[1])}
