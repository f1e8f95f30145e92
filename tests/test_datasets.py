"""fetch(): download from a local HTTP server, verify, unpack, cache. Never the real network."""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import http.server
import threading
import zipfile
from pathlib import Path

import pytest

from mrec_warp.data import datasets
from mrec_warp.data.datasets import DownloadError, data_home, fetch
from mrec_warp.data.ratings import read_ratings
from mrec_warp.errors import InputError

U_DATA = "1\t10\t5\t881250949\n1\t20\t3\t881250950\n2\t10\t4\t881250951\n"


class _Handler(http.server.SimpleHTTPRequestHandler):
    requests: list = []

    def do_GET(self):  # noqa: N802 - http.server's naming
        type(self).requests.append(self.path)
        super().do_GET()

    def log_message(self, *args):  # keep test output clean
        pass


@pytest.fixture
def server(tmp_path):
    """Serve tmp_path/www on 127.0.0.1; yields (base_url, folder, list of requested paths)."""
    www = tmp_path / "www"
    www.mkdir()
    handler = type("Handler", (_Handler,), {"requests": []})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(www)))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/datasets/", www, handler.requests
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def make_archive(www: Path, name="ml-100k.zip", members=None) -> str:
    """Write a zip into www/datasets/ and return its MD5."""
    folder = www / "datasets"
    folder.mkdir(exist_ok=True)
    members = members if members is not None else {"ml-100k/u.data": U_DATA, "ml-100k/u.item": "10|Film (1995)\n"}
    with zipfile.ZipFile(folder / name, "w") as zf:
        for member, text in members.items():
            zf.writestr(member, text)
    return hashlib.md5((folder / name).read_bytes()).hexdigest()


@pytest.fixture
def checksum(monkeypatch):
    """Patch the checksum table entry of a dataset."""

    def patch(name: str, md5: str) -> None:
        monkeypatch.setitem(datasets.DATASETS, name, dataclasses.replace(datasets.DATASETS[name], md5=md5))

    return patch


def test_checksum_table_has_the_published_md5s():
    assert datasets.DATASETS["movielens-100k"].md5 == "0e33842e24a9c977be4e0107933c0723"
    assert datasets.DATASETS["movielens-1m"].md5 == "c4d9eecfca2ab87c1945afe126590906"
    assert datasets.BASE_URL == "https://files.grouplens.org/datasets/movielens/"


def test_fetch_downloads_verifies_and_unpacks(server, checksum, tmp_path):
    base_url, www, requests = server
    checksum("movielens-100k", make_archive(www))
    path = fetch("movielens-100k", dest=tmp_path / "cache", base_url=base_url)
    assert path == tmp_path / "cache" / "ml-100k" / "u.data"
    assert path.read_text() == U_DATA
    assert (path.parent / "u.item").exists()  # the rest of the dataset comes along
    assert requests == ["/datasets/ml-100k.zip"]
    # nothing but the dataset is left in the cache: no zip, no temporary folder
    assert [p.name for p in (tmp_path / "cache").iterdir()] == ["ml-100k"]
    assert len(read_ratings(path, format="movielens")) == 3


def test_second_fetch_uses_the_cache(server, checksum, tmp_path):
    base_url, www, requests = server
    checksum("movielens-100k", make_archive(www))
    first = fetch("movielens-100k", dest=tmp_path / "cache", base_url=base_url)
    second = fetch("movielens-100k", dest=tmp_path / "cache", base_url="http://127.0.0.1:9/unreachable/")
    assert first == second
    assert len(requests) == 1


def test_checksum_mismatch_deletes_the_download(server, checksum, tmp_path):
    base_url, www, requests = server
    make_archive(www)
    checksum("movielens-100k", "0" * 32)
    with pytest.raises(DownloadError, match="checksum mismatch for ml-100k.zip.*the download was deleted") as info:
        fetch("movielens-100k", dest=tmp_path / "cache", base_url=base_url)
    assert isinstance(info.value, InputError)  # the CLI prints it as one line
    assert "\n" not in str(info.value)
    assert list((tmp_path / "cache").iterdir()) == []  # no zip, no folder, no temporary


def test_missing_file_on_the_server(server, tmp_path):
    base_url, _, _ = server
    with pytest.raises(DownloadError, match="HTTP 404"):
        fetch("movielens-1m", dest=tmp_path / "cache", base_url=base_url)
    assert list((tmp_path / "cache").iterdir()) == []


def test_unreachable_server(tmp_path):
    # port 9 (discard) on localhost: connection refused, no outside network involved
    with pytest.raises(DownloadError, match="cannot download"):
        fetch("movielens-100k", dest=tmp_path / "cache", base_url="http://127.0.0.1:9/")


def test_archive_without_the_ratings_file(server, checksum, tmp_path):
    base_url, www, _ = server
    checksum("movielens-100k", make_archive(www, members={"ml-100k/README": "hello"}))
    with pytest.raises(DownloadError, match="the archive has no ml-100k/u.data"):
        fetch("movielens-100k", dest=tmp_path / "cache", base_url=base_url)
    assert list((tmp_path / "cache").iterdir()) == []


def test_archive_escaping_its_folder_is_refused(server, checksum, tmp_path):
    base_url, www, _ = server
    md5 = make_archive(www, members={"ml-100k/u.data": U_DATA, "../evil.txt": "x"})
    checksum("movielens-100k", md5)
    with pytest.raises(DownloadError, match="unsafe path"):
        fetch("movielens-100k", dest=tmp_path / "cache", base_url=base_url)
    assert not (tmp_path / "evil.txt").exists()


def test_movielens_1m_layout(server, checksum, tmp_path):
    base_url, www, _ = server
    md5 = make_archive(www, "ml-1m.zip", {"ml-1m/ratings.dat": "1::1193::5::978300760\n1::661::3::978302109\n"})
    checksum("movielens-1m", md5)
    path = fetch("movielens-1m", dest=tmp_path / "cache", base_url=base_url)
    assert path.name == "ratings.dat"
    assert read_ratings(path, format="movielens")["item"].tolist() == ["1193", "661"]


def test_unknown_dataset(tmp_path):
    with pytest.raises(InputError, match="unknown dataset 'netflix'.*movielens-100k, movielens-1m"):
        fetch("netflix", dest=tmp_path)


def test_stale_folder_is_not_overwritten(server, checksum, tmp_path):
    base_url, www, _ = server
    checksum("movielens-100k", make_archive(www))
    stale = tmp_path / "cache" / "ml-100k"
    stale.mkdir(parents=True)
    (stale / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="holds no complete download.*remove or rename"):
        fetch("movielens-100k", dest=tmp_path / "cache", base_url=base_url)
    assert (stale / "notes.txt").read_text() == "mine"


def test_data_home(monkeypatch, tmp_path):
    monkeypatch.setenv("MREC_WARP_DATA", str(tmp_path / "env"))
    assert data_home() == tmp_path / "env"
    assert data_home(tmp_path / "given") == tmp_path / "given"
    monkeypatch.delenv("MREC_WARP_DATA")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert data_home() == tmp_path / "home" / ".cache" / "mrec_warp"


def test_cache_from_environment(server, checksum, monkeypatch, tmp_path):
    base_url, www, _ = server
    checksum("movielens-100k", make_archive(www))
    monkeypatch.setenv("MREC_WARP_DATA", str(tmp_path / "env-cache"))
    assert fetch("movielens-100k", base_url=base_url) == tmp_path / "env-cache" / "ml-100k" / "u.data"
