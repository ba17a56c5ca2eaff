"""One module per served resource: its discovery entry, its handlers and its Table columns."""
