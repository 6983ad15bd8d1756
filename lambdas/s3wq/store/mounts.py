"""Whether a directory lives on a filesystem other machines can reach: read from Linux's /proc/self/mountinfo.

A local-directory workspace holds only on one machine's own disk. Its
flocks, its boot-clock ages (see local_ages) and its boot ids are this
machine's; a second machine writing the same directory over NFS would see
the first one's live locks as written on another boot, or judge them by a
wall clock that is not the one their mtimes were set on, and run beside
their holders. Such a workspace belongs on S3. Where no mountinfo can be read
(macOS, a sandbox without /proc), nothing can be told and nothing is refused.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

MOUNTINFO_PATH = Path("/proc/self/mountinfo")

# Filesystems whose files other machines (or a VM's host) can write. Kernel
# clients; then cluster filesystems on shared disks; then FUSE clients of
# remote stores ("fuse.<program>" in mountinfo). A generic FUSE filesystem
# may be local (an encrypted folder), so only the known remote ones are named.
NETWORK_FILESYSTEMS = frozenset(
    {
        "nfs",
        "nfs4",
        "cifs",
        "smb3",
        "smbfs",
        "ncpfs",
        "afs",
        "coda",
        "davfs",
        "ceph",
        "glusterfs",
        "lustre",
        "gpfs",
        "beegfs",
        "orangefs",
        "pvfs2",
        "wekafs",
        "ocfs2",
        "gfs2",
        # A host's folder shared into a VM (QEMU's virtfs, WSL's Windows drives; virtio-fs):
        # the host, another kernel, writes it too.
        "9p",
        "virtiofs",
        "fuse.sshfs",
        "fuse.s3fs",
        "fuse.rclone",
        "fuse.gcsfuse",
        "fuse.goofys",
        "fuse.mountpoint-s3",
        "fuse.blobfuse2",
        "fuse.juicefs",
        "fuse.glusterfs",
        "fuse.ceph-fuse",
        "fuse.mfs",
        "fuse.lizardfs",
    }
)

# mountinfo escapes space, tab, newline and backslash in paths as octal (\040).
_OCTAL_ESCAPE = re.compile(r"\\([0-7]{3})")


@dataclass(frozen=True)
class Mount:
    device: tuple[int, int]  # major, minor: what st_dev of a file on it decodes to
    mount_point: str
    fstype: str


def parse_mountinfo(text: str) -> list[Mount]:
    """The mounts of a mountinfo listing, in its order (a later mount on the same point is on top); bad lines skipped.

    A line: ``ID PARENT MAJOR:MINOR ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS``.
    """
    mounts = []
    for line in text.splitlines():
        before, separator, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if not separator or len(fields) < 6 or not tail:
            continue
        major, _, minor = fields[2].partition(":")
        if not (major.isdigit() and minor.isdigit()):
            continue
        mount_point = _OCTAL_ESCAPE.sub(lambda m: chr(int(m[1], 8)), fields[4])
        mounts.append(Mount((int(major), int(minor)), mount_point, tail[0]))
    return mounts


def _existing(path: Path) -> Path:
    # A workspace that does not exist yet lives where its nearest existing parent does.
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def filesystem_type(path: str | os.PathLike[str], mounts: list[Mount]) -> str | None:
    """The type of the filesystem ``path`` is on, by its device, else by the longest mount point above it; None if unknown."""
    where = _existing(Path(path).resolve())
    try:
        device = os.stat(where).st_dev
    except OSError:
        return None
    by_device = [m for m in mounts if m.device == (os.major(device), os.minor(device))]
    if by_device:
        return by_device[-1].fstype
    # No mount with the device of the file (a btrfs subvolume shows its own): the
    # deepest mount point above it, the last listed of those on one point (the top one).
    best: Mount | None = None
    for mount in mounts:
        point = Path(mount.mount_point)
        if (where == point or point in where.parents) and (best is None or len(point.parts) >= len(Path(best.mount_point).parts)):
            best = mount
    return None if best is None else best.fstype


def network_filesystem(path: str | os.PathLike[str], mountinfo_path: Path | None = None) -> str | None:
    """The type of the network filesystem ``path`` is on; None if it is on a local one, or none can be told."""
    try:
        text = (mountinfo_path or MOUNTINFO_PATH).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    fstype = filesystem_type(path, parse_mountinfo(text))
    return fstype if fstype in NETWORK_FILESYSTEMS else None
