"""The ring-level tests: the router type (chash._chash), bounded loads and
the hash functions, against the engine compiled into the extension.

They need no fixture of their own beyond the few a single file defines
beside its tests; the helpers several of them share (hash oracles, the
narrow hashes, the reference router, collision searches) are in
``tests/_support``.
"""
