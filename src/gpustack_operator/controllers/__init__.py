"""Level-based reconcilers of the worker, and the kit that runs them.

The kit: `reconciler` (what a reconcile returns or raises), `watches` (what a controller watches),
`spec` (what it declares: `ControllerSpec`, `Index`, and the `Dependencies` it is built from), `cache`
(the manager's shared, read-only cache), `rbac` (the verbs it calls), `indexers` (shared indexes),
`manager` and `controller` (running them), `setup` (the one list of the worker's controllers).

Every controller module has the same anatomy, so they read alike:

    RBAC = (Rule.of(CLUSTER_QUEUES, "get", "create", "patch"), Rule.of(NAMESPACES, "get"))

    class ClusterQueueReconciler:               # injected deps only; reads the cache, writes with patches
        def __init__(self, client: Client, cache: Cache, now: Callable[[], datetime]) -> None: ...
        async def reconcile(self, key: str) -> Result: ...

    def controller(deps: Dependencies) -> ControllerSpec:
        return ControllerSpec(
            "clusterqueue", ClusterQueueReconciler(deps.client, deps.cache, deps.now), for_(INSTANCE_TYPES),
            watches=(owns(CLUSTER_QUEUES, INSTANCE_TYPES), mapped(LOCAL_QUEUES, local_queue_cluster_queue)),
            indexes=(indexers.LOCAL_QUEUES_BY_CLUSTER_QUEUE,), rbac=RBAC,
        )

and one line in `setup.CONTROLLERS`. Conditions are set with `api.conditions.set_condition`.
"""
