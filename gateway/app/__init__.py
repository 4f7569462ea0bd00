"""The composition root: the app factory (`factory.create_app`), the processes (`serve`,
`worker`), the `gateway` command (`cli`), settings from the environment, the first start
(`bootstrap`) and the runtime that opens and wires every part (`resources`).

Nothing imports this package but the entry points; it may import every other layer. It
re-exports nothing, so `gateway keys ...` does not load the web framework.
"""
