"""Level-based reconcilers of the worker, and the manager that runs them."""
