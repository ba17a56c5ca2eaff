"""CA and serving certificates (cryptography)."""
