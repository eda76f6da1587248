"""Moving data between two rings: which keys move, in batches, with reads
that stay right while they move.

``Migration(old, new, keys)`` lists the keys whose owner differs between
two routers (``old.diff(new)`` arcs, or the keys given routed in both),
hands them out in batches of at most ``batch_size`` ``(key, source,
target)`` triples, and answers ``route(key)`` with the node that holds the
key's data now: the old owner until its batch is marked done, the new one
after.  Its state is plain JSON, so a migration can stop and resume.
"""
from chash.migration.core import Migration, Progress

__all__ = ["Migration", "Progress"]
