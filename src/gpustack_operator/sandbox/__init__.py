"""A local, real control plane (etcd, kube-apiserver, KCM, scheduler, Kueue, kwok) for tests and demos."""
