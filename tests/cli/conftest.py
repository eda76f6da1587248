"""The ``chash`` command's tests (chash.cli): no fixture of their own; they
call ``chash.cli.main`` and read what it prints.
"""
