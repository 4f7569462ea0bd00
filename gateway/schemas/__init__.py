"""The public API's wire types (msgspec Structs): request bodies the edge decodes, answers it
encodes, and the Planned surface. Services take them as values; nothing here has behaviour."""
