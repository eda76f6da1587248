"""The ``chash demo`` tests (chash.demo): no fixture of their own; the demo
starts its own backends and gateway.
"""
