"""The files dltestbed writes into its guest image's tree: the script and systemd unit that apply each VM's
seed disk at boot, sshd's settings and Podman's storage. The guest image's key hashes them.
"""

# Applies the seed disk (vdb, label cidata): keys, host key, name, static address. Our image's
# stand-in for cloud-init, reading the plain files dltestbed puts beside cloud-init's own.
SEED_SCRIPT = """#!/bin/sh
set -eu
mnt=/run/dltestbed-seed
for _ in $(seq 60); do [ -b /dev/vdb ] && break; sleep 0.5; done
mkdir -p "$mnt"
mount -o ro /dev/vdb "$mnt"
d="$mnt/dltestbed"
install -d -m 700 /root/.ssh
install -m 600 "$d/authorized_keys" /root/.ssh/authorized_keys
install -m 600 "$d/ssh_host_ed25519_key" /etc/ssh/ssh_host_ed25519_key
install -m 644 "$d/ssh_host_ed25519_key.pub" /etc/ssh/ssh_host_ed25519_key.pub
name=$(cat "$d/hostname")
hostname "$name"
echo "$name" > /etc/hostname
printf '127.0.0.1 localhost\\n127.0.1.1 %s\\n' "$name" > /etc/hosts
. "$d/network"
ip link set lo up
ip link set eth0 up
ip addr add "$ADDRESS" dev eth0
if [ -n "${GATEWAY:-}" ]; then ip route add default via "$GATEWAY"; fi
umount "$mnt"
"""

SEED_UNIT = """[Unit]
Description=dltestbed: apply the seed disk (SSH keys, host key, name, address)
DefaultDependencies=no
After=local-fs.target systemd-udevd.service
Before=ssh.service network.target
Wants=systemd-udevd.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/dltestbed-seed

[Install]
WantedBy=multi-user.target
"""

SSHD_CONF = """# written by dltestbed: one host key, from the seed disk; keys only
HostKey /etc/ssh/ssh_host_ed25519_key
PasswordAuthentication no
KbdInteractiveAuthentication no
UseDNS no
"""

GRAPHROOT = "/var/lib/containers/storage"  # the guest's Podman store, where the build puts the workload image
STORAGE_CONF = f"""[storage]
driver = "overlay"
runroot = "/run/containers/storage"
graphroot = "{GRAPHROOT}"
"""
