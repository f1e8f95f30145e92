"""``mrec-warp index``: build the approximate-nearest-neighbour index of a factor model (the
``[ann]`` extra), for ``recommend --ann`` and ``serve --ann``."""
from __future__ import annotations

import time

import click

from ..files import check_outputs
from ..models import ann
from ..models.base import open_model
from ._common import friendly_errors, quiet_option, say


@click.command(epilog="""\b
Examples:
  mrec-warp index model.npz                      # writes model.npz.ann
  mrec-warp recommend model.npz -o recs.tsv --ann
  mrec-warp serve model.npz --ann
""")
@click.argument("model_file", metavar="MODEL", type=click.Path(dir_okay=False))
@click.option("--m", "M", type=click.IntRange(min=2, max=ann.MAX_M), default=None,
              help="Links per item in the HNSW graph (more: bigger index, slower build; 16 had the best "
                   "recall measured on 20k-86k items) [16].")
@click.option("--ef-construction", type=click.IntRange(min=1, max=ann.MAX_EF), default=None,
              help="Candidates kept while building (more: better graph, slower build) [200].")
@click.option("--ef-search", type=click.IntRange(min=1, max=ann.MAX_EF), default=None,
              help="Candidates kept while searching, at least the fetch (more: better recall, slower "
                   "queries) [64]; stored in the index.")
@click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True,
              help="Threads building the graph (1 builds the same graph every time).")
@quiet_option
@friendly_errors
def index(model_file, M, ef_construction, ef_search, threads, quiet, verbose):
    """Build the ANN index of MODEL (a warp, hybrid, wrmf or imported factors model; faiss
    HNSW on the model's own scores: inner product plus item bias, lifted to L2) and write
    it beside it as MODEL.ann, bound to the model file's SHA-256: a changed model needs a
    new index, and --ann refuses a stale one. The default recommendations stay exact.
    """
    target = ann.index_path(model_file)
    check_outputs({"MODEL.ann": str(target)}, [model_file])
    model, _ = open_model(model_file)
    sha = ann.file_sha256(model_file)
    started = time.perf_counter()
    built = ann.build(model, M=M or ann.DEFAULT_M, ef_construction=ef_construction or ann.DEFAULT_EF_CONSTRUCTION,
                      ef_search=ef_search or ann.DEFAULT_EF_SEARCH, model_sha256=sha, threads=threads)
    ann.save(built, target)
    say(f"wrote {target}: {model.n_items:,} items, {built.header['dim']} dimensions, "
            f"M {built.header['M']}, ef_search {built.header['ef_search']} ({time.perf_counter() - started:.1f} s)",
        quiet=quiet)
