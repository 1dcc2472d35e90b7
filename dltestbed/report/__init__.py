"""Statistics over stored runs, and their tables."""

# Here, not in inference, so that the CLI's help can name them without importing numpy and scipy.
ROBUST_Z = 3.5  # modified z-score beyond which a value is an outlier (Iglewicz & Hoaglin)
FLEET_MIN_SLOWDOWN = 5.0  # % below its peers' median a host must also be to be flagged: smaller is not worth a look
