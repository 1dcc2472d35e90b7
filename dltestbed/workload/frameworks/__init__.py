"""The frameworks a model's run computes with, one registered class each (base.Framework); `framework(name)`
gives one. Importing this package registers them all: each is one module here and its name in choices."""

from dltestbed.workload.frameworks import pytorch, tensorflow
from dltestbed.workload.frameworks.base import (
    REGISTRY,
    Framework,
    ModelRun,
    ProbeFramework,
    ProbeSetup,
    framework,
    gathered,
    register,
)

__all__ = [
    "REGISTRY",
    "Framework",
    "ModelRun",
    "ProbeFramework",
    "ProbeSetup",
    "framework",
    "gathered",
    "pytorch",
    "register",
    "tensorflow",
]
