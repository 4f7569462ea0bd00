"""Upstream adapters. Nothing here imports `gateway`: adapters get config values and an HTTP
session, return typed results and raise `providers.errors.ProviderError`s."""
