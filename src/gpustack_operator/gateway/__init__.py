"""worker-gateway: one API over the `worker.gpustack.ai/v1` objects of many clusters (contract §9).

A GPUStack server runs it beside itself. Clusters are subscribed over HTTP (`POST /workers`); for each
one the gateway waits until the cluster's aggregated API is Available, runs an informer per v1 kind the
cluster serves, and serves the caches of every subscribed cluster as one list or one stream
(`GET /instancetypes`, `/instances`, ...), optionally folding the InstanceTypes of all clusters by
hardware (`aggregated=true`). Layout: options (flags and their validation), kinds (the served kinds),
events (the in-process fan-out), cluster (one cluster's connection, informers and state), fleet (the
subscribed clusters), aggregate (the pure fold), http (the routes), server (composition and serving).
"""
