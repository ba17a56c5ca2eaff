"""The only code that talks to kube-apiserver."""
