"""Changing node weights gently: slow start for a node that joins or comes
back, and weights that follow measured load.

Both are I/O-free and take the time from their caller; ``set_weight``
applies a weight to a router in one step, so only that node's points move
on the layouts whose points depend on the node alone (python, node, nginx,
haproxy); on those that share out a fixed number of points by weight
(ketama, libmemcached, envoy, grpc) every node's count follows.  Weights
are whole numbers where the layout's program counts them so, at least 1 on
varnish's, and absent on the weightless layouts (``weightless``: nghttpx,
pymemcache, caddy, jump), as each router's ``weight_rule`` says.
"""
from chash.weights.apply import set_weight, weightless, whole_weights
from chash.weights.load import LoadController
from chash.weights.ramp import SlowStart

__all__ = ["LoadController", "SlowStart", "set_weight", "weightless", "whole_weights"]
