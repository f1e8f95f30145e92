"""Id lists (--users / --items files): whole lines are ids, repeats are kept once."""
from __future__ import annotations

from mrec_warp.data.idlist import read_id_list


def test_id_list_takes_whole_lines(tmp_path):
    path = tmp_path / "ids.txt"
    path.write_bytes("\ufeffjohn smith\r\nPapers, Please\n\n   \nu\t1\nspace \n".encode("utf-8"))
    ids = read_id_list(path, "item")
    assert ids == ["john smith", "Papers, Please", "u\t1", "space "]


def test_id_list_repeats_are_kept_once_and_reported(tmp_path):
    logged = []
    path = tmp_path / "users.txt"
    path.write_bytes(b"u1\nu2\nu1\nu1\n")
    assert read_id_list(path, unique=True, note=logged.append) == ["u1", "u2"]
    assert len(logged) == 1 and "2 repeated user id(s) ignored" in logged[0] and "'u1'" in logged[0]
