"""HTTP endpoints of the worker (health, metrics; later the aggregated API and webhooks), on aiohttp."""
