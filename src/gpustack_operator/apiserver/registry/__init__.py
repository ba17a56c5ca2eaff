"""One module per served resource (its discovery entry, schema, handlers and Table columns); the store
machinery they share is in registry/generic."""
