"""The workload: the one program that runs on every target (`python -m dltestbed.workload`).

This package's `__init__` imports nothing heavy: the controller imports `events`
from here without pulling in TensorFlow.
"""
