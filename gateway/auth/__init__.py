from gateway.auth.keys import API_KEY_PREFIX, hash_api_key, new_api_key
from gateway.auth.service import DUPLICATE, EXPIRED, Authenticator, Caller

__all__ = [
    "API_KEY_PREFIX",
    "DUPLICATE",
    "EXPIRED",
    "Authenticator",
    "Caller",
    "hash_api_key",
    "new_api_key",
]
