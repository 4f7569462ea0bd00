"""Which upstream answers: `auto` and pinned models, policies, circuit breakers, fallbacks and
retries, and upstream failures in the gateway's error tree (`upstream_errors`)."""
