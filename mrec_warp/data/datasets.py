"""Public datasets: download once, verify, unpack into a cache, hand back the ratings file.

Only the official GroupLens archives are fetched, and each must match the MD5 GroupLens
publishes for it. The MovieLens licence allows research use but not redistribution, which
is why the project ships synthetic sample data and fetches MovieLens on demand.

Where files go: ``dest`` if given, else ``$MREC_WARP_DATA``, else ``~/.cache/mrec_warp``.
Each dataset unpacks into its own folder there (``ml-100k/``, ``ml-1m/``). Downloads land in
a temporary folder beside it and are renamed into place only once verified and unpacked,
so an interrupted fetch never leaves a half dataset that a later fetch would trust.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Dict, Iterator, Optional

from ..errors import InputError
from ..files import PathLike, owner_tag, remove_stale_temps
from ..progress import SILENT, Progress
from ..signals import stop_on_signals

BASE_URL = "https://files.grouplens.org/datasets/movielens/"
ENV_VAR = "MREC_WARP_DATA"
_CHUNK = 1 << 20
_TIMEOUT = 60  # seconds without data before giving up
#: A download may be at most this many times the archive's known size: a mirror or proxy that
#: streams without end (or a far larger file) is cut off instead of filling the disk.
SIZE_SLACK = 4


class DownloadError(InputError):
    """A download failed or did not match its checksum (printed as one line by the CLI)."""


@dataclass(frozen=True)
class Dataset:
    """One downloadable dataset.

    Attributes
    ----------
    archive : str
        File name of the zip on the server.
    md5 : str
        Checksum GroupLens publishes for the archive.
    folder : str
        Top-level folder inside the archive (and in the cache).
    ratings : str
        The ratings file inside ``folder``.
    size : int
        Bytes of the archive; a download is cut off at :data:`SIZE_SLACK` times this.
    format : str
        How :func:`~mrec_warp.data.ratings.read_ratings` should read it.
    """

    archive: str
    md5: str
    folder: str
    ratings: str
    size: int
    format: str = "movielens"

    @property
    def max_bytes(self) -> int:
        """The most a download of this archive may send before it is refused."""
        return SIZE_SLACK * self.size


#: Name -> dataset. Checksums from https://files.grouplens.org/datasets/movielens/*.zip.md5
DATASETS: Dict[str, Dataset] = {
    "movielens-100k": Dataset("ml-100k.zip", "0e33842e24a9c977be4e0107933c0723", "ml-100k", "u.data", 4_924_029),
    "movielens-1m": Dataset("ml-1m.zip", "c4d9eecfca2ab87c1945afe126590906", "ml-1m", "ratings.dat", 5_917_549),
}


def data_home(dest: Optional[PathLike] = None) -> Path:
    """The cache folder: ``dest``, else ``$MREC_WARP_DATA``, else ``~/.cache/mrec_warp``."""
    if dest is not None:
        return Path(dest).expanduser()
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "mrec_warp"


def fetch(
    name: str,
    dest: Optional[PathLike] = None,
    base_url: Optional[str] = None,
    progress: Optional[Progress] = None,
) -> Path:
    """Download, verify and unpack a dataset unless it is already there.

    Parameters
    ----------
    name : {"movielens-100k", "movielens-1m"}
    dest : path-like, optional
        Cache folder (see :func:`data_home`).
    base_url : str, optional
        Where the archives are (default: GroupLens); the archive name is appended.
    progress : Progress, optional
        Logs the download; silent by default.

    Returns
    -------
    pathlib.Path
        The ratings file (e.g. ``.../ml-100k/u.data``); the rest of the dataset (item
        titles, genres, user data) is beside it. Read it with ``format="movielens"``.

    Raises
    ------
    InputError
        Unknown name, no network, a failed download, or a checksum mismatch (the download
        is deleted).
    """
    progress = progress or SILENT
    if name not in DATASETS:
        raise InputError(f"unknown dataset {name!r}", hint=f"choose one of {', '.join(DATASETS)}")
    ds = DATASETS[name]
    home = data_home(dest)
    target = home / ds.folder
    if (target / ds.ratings).is_file():
        progress.log(f"{name} is already in {target}")
        return target / ds.ratings
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the data folder: {exc.strerror}", path=str(home),
                         hint=f"choose another with `dest` or ${ENV_VAR}") from None

    url = (base_url or BASE_URL).rstrip("/") + "/" + ds.archive
    remove_stale_temps(home, prefix=f".{ds.folder}.")  # what a killed fetch left
    with stop_on_signals(), tempfile.TemporaryDirectory(prefix=f".{ds.folder}.{owner_tag()}", dir=str(home)) as tmp:
        archive = Path(tmp) / ds.archive
        progress.log(f"downloading {url}")
        md5 = _download(url, archive, progress, ds.max_bytes)
        if md5 != ds.md5:
            archive.unlink()
            raise DownloadError(
                f"checksum mismatch for {ds.archive}: md5 {md5}, expected {ds.md5}; the download was deleted",
                path=url, hint="try again; if it happens again the file on the server is not the one expected",
            )
        unpacked = Path(tmp) / "unpacked"
        _unpack(archive, unpacked, url)
        if not (unpacked / ds.folder / ds.ratings).is_file():
            raise DownloadError(f"the archive has no {ds.folder}/{ds.ratings}", path=url)
        _move_into_place(unpacked / ds.folder, target, ds.ratings)
    progress.log(f"{name} unpacked into {target}")
    return target / ds.ratings


def _download(url: str, path: Path, progress: Progress, max_bytes: int) -> str:
    """Stream ``url`` into ``path``, at most ``max_bytes``; return the MD5 of what was received."""
    digest = hashlib.md5()
    too_big = DownloadError(f"the server sends more than {max_bytes:,} bytes, far more than this archive's size; "
                            "the download was stopped and deleted", path=url,
                            hint="check `base_url`: it should serve the GroupLens archive itself")
    try:
        with urllib.request.urlopen(url, timeout=_TIMEOUT) as response, open(path, "wb") as out:
            size = int(response.headers.get("Content-Length") or 0)
            if size > max_bytes:
                raise too_big
            total = -(-size // _CHUNK) if size else None
            for chunk in progress.iterate(_chunks(response), total=total, desc=path.name, unit="MiB"):
                if out.tell() + len(chunk) > max_bytes:
                    raise too_big
                digest.update(chunk)
                out.write(chunk)
            if size and out.tell() != size:
                raise DownloadError(f"download cut short: {out.tell():,} of {size:,} bytes", path=url, hint="try again")
    except urllib.error.HTTPError as exc:
        raise DownloadError(f"download failed: HTTP {exc.code} {exc.reason}", path=url,
                            hint="check the dataset name and `base_url`, or try later") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise DownloadError(f"cannot download: {reason}", path=url,
                            hint=f"check the network, or unzip the archive by hand into {path.parent.parent}") from None
    return digest.hexdigest()


def _chunks(response) -> Iterator[bytes]:
    while True:
        chunk = response.read(_CHUNK)
        if not chunk:
            return
        yield chunk


def _unpack(archive: Path, into: Path, url: str) -> None:
    """Extract a zip, refusing members that would land outside ``into``."""
    try:
        with zipfile.ZipFile(archive) as zf:
            for member in zf.namelist():
                parts = PurePosixPath(member.replace("\\", "/")).parts
                if member.startswith(("/", "\\")) or ".." in parts or (parts and ":" in parts[0]):
                    raise DownloadError(f"unsafe path {member!r} in the archive", path=url)
            zf.extractall(into)
    except zipfile.BadZipFile as exc:
        raise DownloadError(f"not a valid zip archive: {exc}", path=url) from None


def _move_into_place(src: Path, target: Path, ratings: str) -> None:
    """Rename the unpacked folder into the cache, never over someone else's files."""
    try:
        os.rename(src, target)  # atomic; also replaces an empty folder
    except OSError:
        if (target / ratings).is_file():  # a concurrent fetch got there first
            return
        if target.exists():
            raise InputError(
                "folder exists but holds no complete download", path=str(target),
                hint="remove or rename that folder and fetch again",
            ) from None
        raise
