"""How the controller runs a command on a machine: a local process, or SSH with checked host keys
(through a jump host when the machine sits behind one). Used by targets, VMs and provisioning alike;
imports nothing above it."""
