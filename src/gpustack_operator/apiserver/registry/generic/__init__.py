"""The store machinery every served resource shares: a v1 resource over its CRD (crdproxy), reads and
watches answered from the worker's informer (cachedreads, watchcache, selectors), and the JSON or Table
rendering of what is answered (representation). Per-resource modules sit beside this package."""
