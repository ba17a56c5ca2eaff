"""Pure conversion between the versions we serve (`worker.gpustack.ai/v1`) and store (`v1alpha1`).

The v1 InstanceType is the v1alpha1 struct under another version (contract §3.1, "a plain cast"), so
converting is an `apiVersion` rewrite on objects, lists and their items, and watch events, bookmarks
included. No I/O here: the apiserver package calls these on bytes it already holds.
"""
