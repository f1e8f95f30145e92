"""The one plural helper messages use."""
from mrec_warp.progress import plural


def test_plural_agrees_with_the_count():
    assert plural(1, "row") == "1 row"
    assert plural(0, "row") == "0 rows"
    assert plural(2345, "row") == "2,345 rows"
    assert plural(2, "entry", "entries") == "2 entries" and plural(1, "entry", "entries") == "1 entry"
