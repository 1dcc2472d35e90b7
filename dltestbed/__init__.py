"""dltestbed: how much each layer (VM, container) costs a deep-learning workload, measured."""

__version__ = "0.1.0"
