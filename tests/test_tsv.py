"""TSV outputs: ids are written as they are, and an id a TSV cannot hold is refused, not written."""
from __future__ import annotations

import pandas as pd
import pytest

from mrec_warp.data.tsv import write_interactions
from mrec_warp.errors import InputError


def test_write_interactions_refuses_nothing_quotes_nothing(tmp_path):
    df = pd.DataFrame({"user": ["a b"], "item": ['x "y", z']})
    out = tmp_path / "o.tsv"
    write_interactions(df, out)
    assert out.read_text(encoding="utf-8") == 'a b\tx "y", z\n'


def test_tsv_writers_refuse_an_id_with_a_tab_and_csv_quotes_it(tmp_path):
    from mrec_warp import Interactions
    from mrec_warp.models import Popularity
    from mrec_warp.stages.recommend import write_recommendations

    df = pd.DataFrame({"user": ["u1", "u2", "u2"], "item": ["a\tb", "c, d", 'e "f"']})
    with pytest.raises(InputError, match=r"id 'a\\tb' holds a tab or line break"):
        write_interactions(df, tmp_path / "x.tsv")
    assert not (tmp_path / "x.tsv").exists()
    model = Popularity().fit(Interactions.from_dataframe(df))
    with pytest.raises(InputError, match=r"id 'a\\tb' holds a tab"):
        write_recommendations(model, tmp_path / "r.tsv", k=3, exclude=None)
    write_recommendations(model, tmp_path / "r.csv", k=3, exclude=None)
    text = (tmp_path / "r.csv").read_text(encoding="utf-8")
    # RFC 4180: quote a field holding a comma or a quote, double its quotes; a tab needs nothing
    assert "\nu1,a\tb,1,1\n" in text and '\nu1,"c, d",1,2\n' in text and '\nu1,"e ""f""",1,3\n' in text


@pytest.mark.parametrize("bad", ["a\rb", "a\nb", "a\tb"])
def test_write_interactions_refuses_ids_a_tsv_cannot_hold(tmp_path, bad):
    """A lone carriage return too: the csv module writes it unescaped, and it would not read back."""
    df = pd.DataFrame({"user": ["u1", "u2"], "item": ["i1", bad], "value": [1.0, 2.0]})
    out = tmp_path / "out.tsv"
    with pytest.raises(InputError, match="holds a tab or line break"):
        write_interactions(df, out)
    assert list(tmp_path.iterdir()) == []  # no file, no temporary left behind
