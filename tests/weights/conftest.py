"""The chash.weights tests: set_weight, slow start and the load
controller, each checked with ``diff`` to move only the node it changes."""
