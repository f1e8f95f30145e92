"""The one plural helper messages use."""
from mrec_warp.progress import plural


def test_plural_agrees_with_the_count():
    assert plural(1, "row") == "1 row"
    assert plural(0, "row") == "0 rows"
    assert plural(2345, "row") == "2,345 rows"
    assert plural(2, "entry", "entries") == "2 entries" and plural(1, "entry", "entries") == "1 entry"


def test_a_trial_line_says_1_epoch_and_2_epochs(caplog):
    import logging

    from mrec_warp.progress import Progress
    from mrec_warp.stages.trials import log_trial as _log_trial

    with caplog.at_level(logging.INFO, logger="mrec_warp"):
        for epochs in (1, 2):
            row = {"trial": epochs, "model": "warp", "factors": 8, "precision@10": 0.25, "epochs": epochs,
                   "seconds": 1.5}
            _log_trial(Progress(), row, {"model": "warp", "factors": 8}, "precision@10")
    lines = [r.getMessage() for r in caplog.records]
    assert " after 1 epoch (" in lines[0] and " after 2 epochs (" in lines[1], lines
