"""VMs with libvirt: guest images, domain XML, host checks (virt type, GPU passthrough), lifecycle."""
