"""Accelerator detection: one module per manufacturer, the PCI scan they share, and the hardware backend.

See README.md beside this file for what each manufacturer's detector reports.
"""
