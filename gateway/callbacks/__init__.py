"""Task callbacks: one signed delivery (Standard Webhooks 1.0) when a task ends, retried on a
schedule kept in the store, by delivery workers apart from the request path and the task
workers (docs/api.md, "Callbacks")."""
