"""The controller kit: what runs level-based reconcilers, knowing none of them.

Why this package exists: the worker's reconcilers (gpustack_operator.controllers) share one way of being
watched, cached, queued, retried, measured and permitted; that machinery is generic, so it lives here, where
it imports no reconciler and no domain rule (an import-linter contract in setup.cfg holds it to that). An
index a reconciler needs is declared by the reconciler (`spec.Index`), never imported by the kit.

`reconciler` (what a reconcile returns or raises), `watches` (what a controller watches) and `predicates`
(which changes are worth a reconcile), `spec` (what it declares: `ControllerSpec`, `Index`), `cache` (the
manager's shared, read-only cache), `rbac` (the verbs it calls), `problems` (bad input reported once),
`metrics`, and `manager` and `controller` (running them).
"""
