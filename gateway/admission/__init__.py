"""A call's way in and out of the money path: the gatekeeper (rate limits, idempotency
reservation and credit hold in one store step, refusals as errors), idempotency claims, and the
finisher that settles, releases, confirms and abandons, also when the store stalls.
"""
