"""A local-directory workspace on a filesystem other machines can write (NFS and the like) is refused, from a fake mountinfo.

The parser is tested on mountinfo text as the kernel writes it; the refusal
on a fake /proc/self/mountinfo that puts the test's own directory on nfs4,
through open_backend (the real ``s3wq`` command: tests/integration/test_network_workspace.py).
"""

from __future__ import annotations

import os

import pytest

from s3wq.errors import BadWorkspace
from s3wq.store import LocalBackend, mounts, open_backend
from s3wq.store.mounts import Mount, filesystem_type, network_filesystem, parse_mountinfo

# From a Linux host: optional fields (shared:, master:), an escaped space, and a mount stacked on another.
MOUNTINFO = r"""22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard
25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=24684084k
40 27 0:45 / /mnt/shared\040data rw,relatime shared:7 master:2 - nfs4 fileserver:/export/data rw,vers=4.2,addr=10.0.0.2
41 27 0:46 / /net/home rw,relatime - autofs systemd-1 rw,fd=40
42 41 0:47 /home /net/home rw,relatime - nfs fileserver:/home rw,vers=3
43 27 0:48 / /mnt/sshfs rw,nosuid,nodev - fuse.sshfs me@box:/srv rw,user_id=1000
44 27 0:49 / /mnt/enc rw,nosuid,nodev - fuse.gocryptfs /home/me/.enc rw,user_id=1000
45 27 0:50 / /mnt/c rw,noatime - 9p drvfs rw,aname=drvfs
this line is not mountinfo
"""


def test_mountinfo_lines_are_parsed_with_their_escapes_and_optional_fields():
    found = parse_mountinfo(MOUNTINFO)

    assert len(found) == 9
    assert found[1] == Mount((254, 0), "/", "ext4")
    assert found[3] == Mount((0, 45), "/mnt/shared data", "nfs4")
    assert [m.fstype for m in found[4:6]] == ["autofs", "nfs"]


@pytest.mark.parametrize(
    ("path", "fstype"),
    [
        ("mnt/shared data/ws", "nfs4"),
        ("mnt/shared data", "nfs4"),
        ("net/home/me/ws", "nfs"),  # the mount on top of the automounter's
        ("mnt/sshfs/ws", "fuse.sshfs"),
        ("mnt/c/Users/me/ws", "9p"),
        ("mnt/shared", "ext4"),  # a name's prefix is not its folder
        ("mnt/enc/ws", "fuse.gocryptfs"),
        ("home/me/ws", "ext4"),
    ],
)
def test_a_path_is_on_the_deepest_mount_above_it(tmp_path, path, fstype):
    # The listing's mount points moved under tmp_path, whose device it does not
    # list (as for a btrfs subvolume, which shows its own): judged by the mount points.
    listing = MOUNTINFO.replace(" /", f" {tmp_path}/").replace(f"{tmp_path}/ rw", f"{tmp_path} rw")
    device = os.stat(tmp_path).st_dev
    listing = listing.replace(f" {os.major(device)}:{os.minor(device)} ", " 4095:1048575 ")  # whatever this machine's disk is
    for mount in parse_mountinfo(listing):
        os.makedirs(mount.mount_point, exist_ok=True)

    assert filesystem_type(tmp_path / path, parse_mountinfo(listing)) == fstype


def test_the_device_of_the_directory_decides_before_the_mount_points(tmp_path):
    device = os.stat(tmp_path).st_dev
    listing = f"27 1 {os.major(device)}:{os.minor(device)} / /elsewhere rw - nfs4 server:/x rw\n1 0 254:99 / / rw - ext4 /dev/x rw\n"

    assert filesystem_type(tmp_path / "not-yet" / "ws", parse_mountinfo(listing)) == "nfs4"


@pytest.mark.parametrize("fstype", ["nfs", "nfs4", "cifs", "smb3", "ceph", "glusterfs", "lustre", "gpfs", "fuse.sshfs", "9p", "virtiofs"])
def test_network_filesystems_are_named(fstype):
    assert fstype in mounts.NETWORK_FILESYSTEMS


@pytest.mark.parametrize("fstype", ["ext4", "xfs", "btrfs", "zfs", "tmpfs", "overlay", "apfs", "fuse.gocryptfs", "fuseblk"])
def test_local_filesystems_are_not(fstype):
    assert fstype not in mounts.NETWORK_FILESYSTEMS


def test_a_workspace_on_nfs_is_refused(tmp_path, on_nfs):
    assert network_filesystem(tmp_path / "ws") == "nfs4"

    with pytest.raises(BadWorkspace, match=r"network filesystem \(nfs4\).*shared between machines must be on S3"):
        open_backend(str(tmp_path / "ws"))
    with pytest.raises(BadWorkspace):
        LocalBackend(tmp_path / "ws")
    assert not (tmp_path / "ws").exists()


def test_without_mountinfo_nothing_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(mounts, "MOUNTINFO_PATH", tmp_path / "no-such-file")

    assert network_filesystem(tmp_path) is None
    LocalBackend(tmp_path / "ws")


def test_this_machines_own_tmp_directory_is_local(tmp_path):
    assert network_filesystem(tmp_path) is None
