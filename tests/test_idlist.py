"""Id lists (--users / --items files): whole lines are ids, repeats are kept once."""
from __future__ import annotations

from mrec_warp.data.id_lines import read_id_list


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


def test_id_list_from_a_device_is_refused_before_reading(tmp_path):
    import pytest
    from pathlib import Path

    from mrec_warp.errors import InputError

    if not Path("/dev/zero").exists():
        pytest.skip("needs /dev/zero")
    with pytest.raises(InputError, match=r"^/dev/zero: user list is a character device"):
        read_id_list("/dev/zero")
    with pytest.raises(InputError, match=r"user list is a directory"):
        read_id_list(tmp_path)


def test_id_list_limits_stop_the_reading(tmp_path, monkeypatch):
    import pytest

    from mrec_warp.data import inputs
    from mrec_warp.errors import InputError

    path = tmp_path / "users.txt"
    path.write_bytes(b"".join(b"u%d\n" % i for i in range(20)))
    monkeypatch.setattr(inputs, "MAX_LIST_IDS", 10)
    with pytest.raises(InputError, match=r"users\.txt:11: user list holds more than 10 lines"):
        read_id_list(path)
    monkeypatch.setattr(inputs, "MAX_LIST_IDS", 100)
    monkeypatch.setattr(inputs, "MAX_LINE_BYTES", 8)
    path.write_bytes(b"u1\nu2\n" + b"x" * 9 + b"\n")
    with pytest.raises(InputError, match=r"users\.txt:3: line is longer than 8 bytes"):
        read_id_list(path)
    path.write_bytes(b"u1\nu\x002\n")
    with pytest.raises(InputError, match=r"users\.txt:2: line holds a NUL byte"):
        read_id_list(path)


def test_id_list_takes_a_lone_carriage_return_as_a_line_end(tmp_path):
    """Id lists cut lines themselves: a CR alone ends a line (old Mac), as before."""
    path = tmp_path / "ids.txt"
    path.write_bytes(b"u1\ru2\r\nu3\n")
    assert read_id_list(path) == ["u1", "u2", "u3"]


def test_first_column_of_a_feature_file_is_read_as_the_feature_reader_reads_it(tmp_path):
    import pandas as pd

    from mrec_warp.data.features import write_features

    ids = ['"a" b', "plain", "c,d"]
    write_features(pd.DataFrame({"id": ids, "feature": ["f1", "f2", "f3"]}), tmp_path / "f.tsv")
    assert read_id_list(tmp_path / "f.tsv", "item", first_column=True) == ids
    (tmp_path / "f.csv").write_text('"Warhammer 40,000",x\nplain,y\n"""q""",z\n', encoding="utf-8")
    assert read_id_list(tmp_path / "f.csv", "item", first_column=True) == ["Warhammer 40,000", "plain", '"q"']


def test_id_list_of_exactly_the_most_lines_reads(tmp_path, monkeypatch):
    from mrec_warp.data import inputs

    monkeypatch.setattr(inputs, "MAX_LIST_IDS", 3)
    path = tmp_path / "users.txt"
    path.write_bytes(b"u1\nu2\nu3\n")
    assert read_id_list(path) == ["u1", "u2", "u3"]
