"""Admission webhooks called by kube-apiserver, served by the aggregated API's HTTPS server."""
