"""Slurm as a launcher: the controller is a submit host; a bench holds one allocation and runs each
workload as an srun step on a node Slurm gave it (see alloc)."""

from dltestbed.slurm.alloc import Allocation, Node, Request, check_cluster, check_request

__all__ = ["Allocation", "Node", "Request", "check_cluster", "check_request"]
