"""The chash.compat tests: no fixture of their own; the real nginx,
nutcracker and memcached they start come from ``_support.compat_programs``.
"""
