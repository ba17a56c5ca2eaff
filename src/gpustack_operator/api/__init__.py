"""Wire types, constants, label/annotation keys and the CRD schema source. No I/O."""
