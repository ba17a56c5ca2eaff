"""Level-based reconcilers of the worker; the kit that runs them is gpustack_operator.controllerkit.

Besides the reconcilers (one module each, their helpers in modules named after them): `dependencies` (what
every reconciler is built from), `settingsview` (the settings Secret as they read it), `indexers` (the Kueue
indexes several of them query), `pools` (the scheduling chain's lookups), `setup` (the one list of the
worker's controllers).

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
