"""Pick the store backend from a URL (the `GATEWAY_STORE_URL` kind of setting).

sqlite:///relative/path.db      a file relative to the working directory
sqlite:////abs/path.db          an absolute path (the parent folder is created)
redis://host:port/db            one Redis (also rediss:// for TLS, unix:///path.sock)
redis+cluster://host:port       a Redis Cluster, from any of its nodes (rediss+cluster://: TLS)
redis+sentinel://host:port[,host:port]/SERVICE[/db]
                                the primary of SERVICE behind Sentinel (rediss+sentinel://)

Redis URLs take the store's options too (`?shards=16&wait_replicas=1&wait_ms=250`): see
`gateway/store/redis/target.py` and docs/store.md.
"""

from __future__ import annotations

from gateway.store.base import Store

__all__ = ["store_from_url"]

_SQLITE = "sqlite:///"
_REDIS = (
    "redis://",
    "rediss://",
    "unix://",
    "redis+cluster://",
    "rediss+cluster://",
    "redis+sentinel://",
    "rediss+sentinel://",
)


def store_from_url(url: str, *, serving: bool = False) -> Store:
    """The (unopened) store for `url`; ValueError for a scheme or path it cannot use.

    `serving`: for `gateway serve` (an embedded store then claims its file for one process).
    """
    if url.startswith(_SQLITE):
        path = url.removeprefix(_SQLITE)
        if not path or path.endswith("/"):
            raise ValueError(
                f"sqlite store URL needs a file path, e.g. sqlite:///gateway.db: {url!r}"
            )
        from gateway.store.sqlite import SqliteStore  # backends load only when chosen

        return SqliteStore(path, serving=serving)
    if url.startswith(_REDIS):
        from gateway.store.redis import RedisStore

        return RedisStore(url)
    scheme = url.split("://", 1)[0] if "://" in url else url
    raise ValueError(
        f"unsupported store URL scheme {scheme!r}: use sqlite:///relative.db, "
        "sqlite:////absolute/path.db, redis://host:port/db, rediss://host:port/db, "
        "redis+cluster://host:port or redis+sentinel://host:port/SERVICE"
    )
