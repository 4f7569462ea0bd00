"""Image and music generation as asynchronous tasks: create, run, look up, cancel."""
