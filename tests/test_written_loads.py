"""What is written is what loads (issue 20, item 7): a model the loader would refuse, or
one that ranks nothing, is refused when it is saved -- one line naming what to change,
the old file left as it was -- and ``recommend`` never reports success for a model that
ranks nothing."""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import pytest
from click.testing import CliRunner

from mrec_warp.cli import main
from mrec_warp.data.interactions import Interactions
from mrec_warp.data.npz import MAX_ID_CHARS
from mrec_warp.errors import InputError
from mrec_warp.models import Popularity, load


def ratings(tmp_path, name="t.tsv", n_users=30, n_items=12):
    path = tmp_path / name
    path.write_text("".join(f"u{u}\ti{(u * 5 + j) % n_items}\t{1 + j}\n" for u in range(n_users) for j in range(4)))
    return path


def fitted_popularity(user_ids):
    matrix = sp.csr_matrix(np.ones((len(user_ids), 2), np.float32))
    return Popularity().fit(Interactions(matrix, list(user_ids), ["a", "b"]))


def test_an_id_the_loader_refuses_is_refused_at_save_and_the_old_file_kept(tmp_path):
    target = tmp_path / "m.npz"
    fitted_popularity(["u1", "u2"]).save(target)
    before = target.read_bytes()
    model = fitted_popularity(["u1", "x" * (MAX_ID_CHARS + 1)])
    with pytest.raises(InputError, match=r"m\.npz: user id 'x+'\.\.\. is 65,537 characters long: a model file "
                                         r"holds ids of up to 65,536.*nothing was written \(shorten the ids, e\.g\."):
        model.save(target)
    assert target.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["m.npz"]
    fitted_popularity(["u1", "x" * MAX_ID_CHARS]).save(target)  # the limit itself loads
    assert load(target).user_ids[1] == "x" * MAX_ID_CHARS


def test_saving_runs_the_loaders_checks_on_the_written_file(tmp_path):
    """A fitted model whose arrays the loader refuses (here a count made infinite) is never
    written, to a path or to a file object."""
    model = fitted_popularity(["u1", "u2"])
    model.get_arrays = lambda: {name: np.full_like(a, np.inf) if a.dtype.kind == "f" else a
                                 for name, a in type(model).get_arrays(model).items()}
    import io
    buffer = io.BytesIO()
    for target in (tmp_path / "m.npz", buffer):
        with pytest.raises(InputError, match=r"the trained model would not load \(.*\); nothing was written"):
            model.save(target)
    assert not (tmp_path / "m.npz").exists() and buffer.getvalue() == b""


def test_a_model_that_scores_nothing_finite_is_not_saved(tmp_path, monkeypatch):
    model = fitted_popularity(["u1", "u2"])
    monkeypatch.setattr(Popularity, "score_users",
                        lambda self, users, out=None: np.full((len(users), self.n_items), np.nan, np.float32))
    with pytest.raises(InputError, match=r"every score of its first 2 users is NaN or infinite"):
        model.save(tmp_path / "m.npz")
    assert not (tmp_path / "m.npz").exists()


@pytest.mark.parametrize("options, flag", [
    (["--model", "wrmf", "--alpha", "1e300", "--confidence", "linear"], "--alpha"),
    (["--model", "warp", "--alpha", "1e300", "--confidence", "linear", "--epochs", "1"], "--alpha"),
    (["--model", "hybrid", "--identity-weight", "1e300", "--no-normalize", "--epochs", "1"], "--identity-weight"),
    (["--model", "hybrid", "--identity-weight", "1e300", "--epochs", "1"], "--identity-weight"),
])
def test_parameters_that_overflow_fail_at_train_time_naming_the_flag(tmp_path, options, flag):
    """They used to exit 0 and write a model that did not load (confidences infinite) or
    ranked nothing (recommend: '0 recommendations for 942 users', exit 0)."""
    data = ratings(tmp_path)
    (tmp_path / "m.npz").write_bytes(b"old model")
    result = CliRunner().invoke(main, ["train", str(data), "-o", str(tmp_path / "m.npz"), "-q", *options])
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and flag in lines[0], result.stderr
    assert "Warning" not in result.stderr
    assert (tmp_path / "m.npz").read_bytes() == b"old model"


def test_recommend_refuses_a_model_that_ranks_nothing(tmp_path, monkeypatch):
    data = ratings(tmp_path)
    runner = CliRunner()
    assert runner.invoke(main, ["train", str(data), "-o", str(tmp_path / "m.npz"), "--model", "popularity",
                                "-q"]).exit_code == 0
    monkeypatch.setattr(Popularity, "score_users",
                        lambda self, users, out=None: np.full((len(users), self.n_items), np.nan, np.float32))
    result = runner.invoke(main, ["recommend", str(tmp_path / "m.npz"), "-o", str(tmp_path / "r.tsv")])
    assert result.exit_code == 2 and "is NaN or infinite: it ranks nothing" in result.stderr
    assert not (tmp_path / "r.tsv").exists()


def test_a_catalogue_without_other_items_is_not_called_k_1(tmp_path):
    from mrec_warp.topk import capped_k
    assert capped_k(10, 0, "other items") == (1, "there are no other items to rank: every list is empty")
    assert capped_k(10, 3) == (3, "`k=10` is more than the 3 items there are; using `k=3`")


def test_zero_recommendations_are_explained_not_silent(tmp_path):
    (tmp_path / "t.tsv").write_text("u1\ti1\nu1\ti2\nu2\ti1\nu2\ti2\n")  # every user has seen every item
    runner = CliRunner()
    assert runner.invoke(main, ["train", str(tmp_path / "t.tsv"), "-o", str(tmp_path / "m.npz"), "--model",
                                "popularity", "-q"]).exit_code == 0
    result = runner.invoke(main, ["recommend", str(tmp_path / "m.npz"), "-o", str(tmp_path / "r.tsv")])
    assert result.exit_code == 0 and "0 recommendations for 2 users" in result.stdout
    assert "note: no user got a recommendation: every item of the 2 the model ranks is excluded" in result.stderr
