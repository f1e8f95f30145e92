"""The model contract: the :class:`Recommender` base class every family implements.

What a family must provide is declared abstract here (:meth:`Recommender.fit`,
:meth:`~Recommender.score_users`, :meth:`~Recommender.get_arrays`,
:meth:`~Recommender.set_arrays`, :meth:`~Recommender.array_spec`); the few class-level
capabilities that divide families (:data:`CAPABILITIES`) are what stages ask instead of
testing a family's name or class, and a behaviour only some families have is a method with a
refusing default here that they override (:func:`provides`). Everything else -- parameters,
ids, batch top-k, save/load -- is shared. A family names itself with ``name`` and is
registered when its class is defined (:mod:`.families`). Neighbours in the factor space are in
:mod:`.neighbours`; the factor models' shared base is
:class:`~mrec_warp.models.factor_model.FactorModel`. The contract is documented for family
authors in docs/contract.rst.
"""
from __future__ import annotations

import abc
import inspect
from typing import Any, ClassVar, Dict, Optional, Sequence, Tuple, Type, Union

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..data.interactions import as_csr, id_texts
from ..data.npz import source_name
from ..data.inputs import check_readable
from ..errors import InputError, spell_parameters
from ..files import PathLike
from ..progress import Progress
from ..topk import block_to_frame, iter_top_k, probe_unrankable
from . import single_user
from .declared import Param, check_declared
from .fallback import check_unknown_users, lists_frame, with_sources
from .families import REGISTRY, family_names, register
from .indices import ExcludeArg, IdsArg, IndexArg, as_indices, check_k
from .model_ids import GeneratedIdsWarning, ModelIds  # noqa: F401 (GeneratedIdsWarning: public here)
from .neighbours import Neighbours
from .tuning import TuneHooks
from .persistence import HINT as MODEL_FILE_HINT, load_model, save_model
from .selection import chosen_attrs

#: The capabilities that divide families (class attributes, each a bool), and what each
#: promises. Stages and the command line ask these, never a family's name or class.
CAPABILITIES: Dict[str, str] = {
    "supports_fold_in": "fold_in(history, ...) adds or refines users without refitting",
    "fold_in_epochs": "fold-in iterates: fold_in's epochs is used, not ignored",
    "has_factors": "user_factors / item_factors (neighbours by cosine; factor_parts for one-user scoring)",
    "supports_confidence": "a confidence parameter weighs each row by its value",
    "early_stopping": "trained in epochs, choosing their count on a validation split "
                      "(fit takes validation and progress)",
    "draws_random_numbers": "the fit is random: it takes random_state (the seed)",
    "hogwild": "fit writes shared arrays from several threads: it runs on threads, never processes",
    "finds_similar_items": "similar_items / similar rank neighbours (by factors or item-item weights)",
}


class Recommender(ModelIds, Neighbours, TuneHooks, abc.ABC):
    """Base class of every model: the contract between a model family and the stages.

    A family declares its hyper-parameters as keyword arguments of ``__init__`` (stored
    under the same names, as in scikit-learn), implements the abstract methods
    (:meth:`fit`, :meth:`score_users`, :meth:`get_arrays`, :meth:`set_arrays`,
    :meth:`array_spec`), and sets the capabilities of :data:`CAPABILITIES` that are true
    for it (each defaults to ``False``). Everything else -- parameters, top-k
    recommendation, id mapping, persistence -- is shared; what ``tune`` asks a family
    (cost, memory refusal, rungs, how a trial is built and fitted) has defaults in
    :class:`~mrec_warp.models.tuning.TuneHooks`.

    Fitted attributes: ``user_ids``, ``item_ids`` (original ids of rows and columns) and
    ``train_`` (the CSR the model was fitted on, used to exclude seen items).
    """

    #: The family's name: ``train --model``, ``tune --models``, messages. Setting it in a class
    #: body registers the class (:mod:`.families`); ``None`` there: a model loaded from files
    #: that ``train`` does not fit (imported factors). A subclass that does not set it is not
    #: registered.
    name: ClassVar[Optional[str]] = None
    #: Where the family comes in every list of families (``train --model``'s choices, ``tune``'s
    #: families, the references): ascending. Read from the class body, as ``name`` is (a
    #: subclass does not take its parent's place); the families that set none come after the
    #: others, in the order their classes are defined.
    order: ClassVar[Optional[int]] = None

    # -- capabilities (see CAPABILITIES) -------------------------------------------------------
    supports_fold_in: ClassVar[bool] = False
    fold_in_epochs: ClassVar[bool] = False
    has_factors: ClassVar[bool] = False
    supports_confidence: ClassVar[bool] = False
    early_stopping: ClassVar[bool] = False
    draws_random_numbers: ClassVar[bool] = False
    hogwild: ClassVar[bool] = False
    finds_similar_items: ClassVar[bool] = False

    #: The parameters that scale the model's numbers, which a save that finds every score
    #: NaN or infinite names as the ones to lower (none: "the largest one").
    SCALING_PARAMETERS: ClassVar[Tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "name" in vars(cls):
            register(cls)

    @classmethod
    def capabilities(cls) -> Dict[str, bool]:
        """Every capability of :data:`CAPABILITIES` and whether this family has it."""
        return {name: getattr(cls, name) for name in CAPABILITIES}

    # -- parameters (scikit-learn conventions) ---------------------------------------------
    #: The constructor's parameters, declared once (:mod:`~mrec_warp.models.declared`): their
    #: checks, ``train``'s options, ``tune``'s space and the parameter table come from it.
    PARAMETERS: Tuple[Param, ...] = ()

    def check_params(self) -> None:
        """Raise :class:`~mrec_warp.errors.InputError` for an impossible parameter: each declared
        parameter's own check (:attr:`PARAMETERS`), then the rules between parameters
        (:meth:`_check_extra`)."""
        check_declared(self)
        self._check_extra()

    def _check_extra(self) -> None:
        """Rules that involve more than one parameter (subclasses extend)."""

    def _check_file_params(self) -> None:
        """Checks a model file's parameters need beyond :meth:`check_params`: what training
        checks against the data (a file has no data to check it against). None by default."""

    @classmethod
    def param_names(cls):
        """The constructor's parameter names, sorted: what :meth:`get_params` returns and
        :meth:`set_params` accepts."""
        sig = inspect.signature(cls.__init__)
        return sorted(
            p.name for p in sig.parameters.values()
            if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        )

    def get_params(self, deep: bool = True) -> Dict[str, Any]:
        """The constructor parameters and their current values."""
        return {name: getattr(self, name) for name in self.param_names()}

    def set_params(self, **params: Any) -> "Recommender":
        """Set constructor parameters; unknown names raise ``ValueError``."""
        valid = set(self.param_names())
        for name, value in params.items():
            if name not in valid:
                raise ValueError(f"{type(self).__name__} has no parameter {name!r}; valid: {sorted(valid)}")
            setattr(self, name, value)
        return self

    def __getstate__(self) -> Dict[str, Any]:
        """The model's state without the caches of one-user scoring and id look-ups: they are
        rebuilt on demand, and a pickled model (process and Dask workers) or a copy would
        otherwise carry a second item matrix and the id maps."""
        drop = set(single_user.CACHES) | {"_id_maps"}
        return {k: v for k, v in self.__dict__.items() if k not in drop}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    # -- what a family provides ----------------------------------------------------------------
    @abc.abstractmethod
    def fit(self, X: Any, *args: Any, **kwargs: Any) -> "Recommender":
        """Fit on a users x items matrix (CSR or :class:`Interactions`); returns ``self``.

        Every stored entry is an interaction (also one of value 0). Must call
        :meth:`set_training_data` (ids, ``train_``). ``train`` passes ``progress``, and more
        keywords to a family whose ``fit`` takes them by name (:func:`~.families.fit_takes`):
        ``validation`` (``early_stopping``), ``user_features`` / ``item_features`` (a family
        that learns from features), ``workers`` and ``use_values`` (one whose fit spreads over
        workers and weighs pairs with or without values).
        """

    @abc.abstractmethod
    def score_users(self, users: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
        """Scores of users (row indices) against every item: float32 (len(users), n_items).

        ``out``, when given, is a C-contiguous float32 array of that shape to write into
        (batch scoring passes one to save a copy of every block).
        """

    @abc.abstractmethod
    def get_arrays(self) -> Dict[str, np.ndarray]:
        """The fitted arrays a model file holds (name -> array), as :meth:`set_arrays` takes them."""

    @abc.abstractmethod
    def set_arrays(self, arrays: Dict[str, np.ndarray]) -> None:
        """Take the arrays of :meth:`get_arrays` (from a model file: validate them, raising
        ``ValueError`` with what is wrong); ``user_ids``, ``item_ids`` and ``train_`` are set."""

    @classmethod
    @abc.abstractmethod
    def array_spec(cls, params: Dict[str, Any], n_users: int, n_items: int) -> Dict[str, Tuple[str, Tuple]]:
        """Kind and shape of each array of :meth:`get_arrays` (``None``: any size), checked
        in a model file's headers before any array is read."""

    def fold_in(self, history, *, epochs: Optional[int] = None, user_features=None,
                progress: Optional[Progress] = None, user_ids: Optional[Sequence] = None) -> "Recommender":
        """Add users from a history without refitting (in place; returns ``self``).

        The one signature of every family with ``supports_fold_in``: ``history`` is a
        ratings path, a ``user, item`` DataFrame, Interactions, (user, item) pairs or a
        sparse matrix whose rows are the users ``user_ids``; new users are appended, known
        ones refined; ``epochs`` is used by families with ``fold_in_epochs`` (others ignore
        it); ``user_features`` by a family that learns from features (others refuse it).
        """
        raise InputError(f"a {type(self).__name__} model cannot fold in users",
                         hint="retrain with the new users, or use a model that folds in (e.g. `model=warp`)")

    def append_users(self, ids, user_features=None) -> None:
        """Append users with empty training rows (and ``user_features`` where the family
        learns from features); fold-in, and recommend for a family that serves unknown users
        (:meth:`unknown_user_ranking`), call it."""
        raise InputError(f"a {type(self).__name__} model cannot add users", hint="retrain with the new users")

    # -- what only some families do: a refusing default here, overridden where it is done -------
    def unknown_user_ranking(self) -> Optional[str]:
        """What a user the model never saw is recommended, in words for the log ("the most
        popular items overall"), when the family serves such users (``recommend`` appends them
        with :meth:`append_users`); ``None``, the default: they are refused."""
        return None

    def explain_frame(self, user_id, item_ids: Optional[Sequence] = None, k: int = 5, n: int = 10) -> pd.DataFrame:
        """Which of the user's training items drove the scores of ``item_ids`` (default: the
        user's top-``n`` recommendations), as a table: user, item, score, history_item,
        contribution, rank. The default refuses: only a family whose score is a sum over the
        user's history can split it (WRMF)."""
        raise InputError(f"a {type(self).__name__} model cannot explain its scores",
                         hint=f"train a {family_names(explains)} model")

    def merge_sub_models(self, parts: Sequence[Dict[str, np.ndarray]]) -> None:
        """Take as this model's fitted arrays those of sub-models fitted apart on its training
        data (``train``'s ``sub_models``: :mod:`mrec_warp.stages.submodels`), each with a share of
        the factors; ``parts`` hold each one's ``user_factors``, ``item_factors``, ``item_bias``
        and ``best_epoch``. The default refuses: only a family whose scores add up over
        sub-models fitted apart can be fitted so (WARP)."""
        raise InputError(f"a {type(self).__name__} model cannot be fitted as sub-models", hint="drop `sub_models`")

    def get_attrs(self) -> Dict[str, Any]:
        """Small fitted scalars worth saving (JSON-serialisable). Subclasses extend this dict;
        on load only its keys, with values of the same types, are accepted."""
        # id_encoding_: "latin-1" when the ids came from a Latin-1 file, so that outputs
        # (recommend, similar) write them back as the same bytes
        # and, per setting the family chooses on its hold-out, the value in force (selection)
        return {"ids_generated_": bool(getattr(self, "ids_generated_", False)),
                "id_encoding_": str(getattr(self, "id_encoding_", "utf-8")), **chosen_attrs(self)}

    def set_attrs(self, attrs: Dict[str, Any]) -> None:
        for k, v in attrs.items():
            setattr(self, k, v)

    # -- scoring and recommending ----------------------------------------------------------
    def score(self, users: IndexArg, items: IndexArg) -> Union[np.ndarray, np.float32]:
        """Scores of (user, item) index pairs; the same as :meth:`predict`."""
        return self.predict(users, items)

    def predict(self, users: IndexArg, items: IndexArg) -> Union[np.ndarray, np.float32]:
        """Scores of (user, item) pairs given by row and column indices.

        ``users`` and ``items`` are single indices or 1-D sequences broadcast against each
        other as numpy does (as LightFM's ``predict``): ``predict(0, [1, 2])`` scores items 1
        and 2 for user 0, ``predict([0, 1], [5, 9])`` the pairs (0, 5) and (1, 9). Map ids
        with :meth:`user_indices` / :meth:`item_indices`.

        Returns
        -------
        float32 array of the broadcast length, or a float32 scalar for two single indices.
        """
        self.check_fitted()
        u, u_scalar = as_indices(users, self.n_users, "user")
        i, i_scalar = as_indices(items, self.n_items, "item")
        try:
            u, i = np.broadcast_arrays(u, i)
        except ValueError:
            raise InputError(f"{len(u)} users and {len(i)} items do not pair up",
                             hint="give equal lengths, or one user (or one item) to pair with all") from None
        out = np.empty(len(u), dtype=np.float32)
        uniq, inverse = np.unique(u, return_inverse=True)
        for start in range(0, len(uniq), 1024):
            block = uniq[start:start + 1024]
            scores = self.score_users(block)
            sel = (inverse >= start) & (inverse < start + len(block))
            out[sel] = scores[inverse[sel] - start, i[sel]]
        return out[0] if u_scalar and i_scalar else out

    def exclusion_matrix(self, exclude: ExcludeArg) -> Optional[sp.csr_matrix]:
        if isinstance(exclude, str):
            if exclude != "train":
                raise ValueError("exclude must be 'train', None or a users x items sparse matrix")
            return self.train_
        if exclude is None:
            return None
        csr = as_csr(exclude)
        if csr.shape[1] != self.n_items:
            raise ValueError(f"exclude has {csr.shape[1]} columns, the model has {self.n_items} items")
        return csr

    def item_mask(self, filter_items: Optional[IndexArg]) -> Optional[np.ndarray]:
        """A uint8 mask of the items never to show (``None`` when there are none)."""
        if filter_items is None:
            return None
        idx, _ = as_indices(filter_items, self.n_items, "item")
        if len(idx) == 0:
            return None
        mask = np.zeros(self.n_items, dtype=np.uint8)
        mask[idx] = 1
        return mask

    def recommend(
        self,
        users: Optional[IndexArg] = None,
        k: int = 10,
        exclude: ExcludeArg = "train",
        filter_items: Optional[IndexArg] = None,
        n_jobs: int = 1,
        block_size: Optional[int] = None,
    ) -> Tuple[np.ndarray, np.ndarray]:
        """Top-k items for each user, best first.

        Parameters
        ----------
        users : int or int array, optional
            Row indices, each in ``[0, n_users)`` (see :meth:`user_indices` to map ids);
            default all users. A single index gives 1-D results.
        k : int
            List length.
        exclude : "train", None or sparse matrix
            Items never to recommend to a user: the training items (default), nothing, or a
            users x items matrix whose rows follow the model's user indices.
        filter_items : int or int array, optional
            Item indices never to recommend to anyone (e.g. discontinued items), on top of
            ``exclude``.
        n_jobs : int
            Threads scoring blocks of users at once.
        block_size : int, optional
            Users scored at a time; bounds memory (default keeps a block near 64 MB).

        Returns
        -------
        items : int64 array (n_users, k), or (k,) for a single user
            Item indices, best first. ``k`` is capped at the number of items; where fewer
            than ``k`` items are left after the exclusions, the row ends in ``-1`` (score
            ``-inf``): drop those before mapping indices to ids (``recommend_frame`` does).
        scores : float32 array of the same shape
        """
        self.check_fitted()
        k = min(check_k(k), max(1, self.n_items))  # a longer list would be only -1 padding
        if users is None:
            users, scalar = np.arange(self.n_users), False
        else:
            users, scalar = as_indices(users, self.n_users, "user")
        mask = self.item_mask(filter_items)
        if len(users) <= single_user.MAX_USERS:  # one matrix-vector product per user, same lists
            few = single_user.recommend_few(self, users, k, self.exclusion_matrix(exclude), mask)
            if few is not None:
                return (few[0][0], few[1][0]) if scalar else few
        items = np.empty((len(users), k), dtype=np.int64)
        scores = np.empty((len(users), k), dtype=np.float32)
        pos = 0
        for _, block_items, block_scores in iter_top_k(
            self.score_users, self.n_items, users, k, exclude=self.exclusion_matrix(exclude), n_jobs=n_jobs,
            block_size=block_size, item_mask=mask,
        ):
            n = len(block_items)
            items[pos:pos + n] = block_items
            scores[pos:pos + n] = block_scores
            pos += n
        return (items[0], scores[0]) if scalar else (items, scores)

    def recommend_history(self, items: IndexArg, k: int = 10,
                          filter_items: Optional[IndexArg] = None) -> Tuple[np.ndarray, np.ndarray]:
        """Top-k for an anonymous history, without changing the model: the list that
        :meth:`fold_in` of that one history and :meth:`recommend` of the new user would give
        (its items excluded), in one matrix-vector product after the fold-in.

        ``items`` are the history's item indices (repeats count once); WARP, hybrid (as a
        user without features) and WRMF fold it in, item-item models and popularity score it
        directly. Returns item indices and scores, (k,), padded with ``-1`` / ``-inf`` as
        :meth:`recommend`.
        """
        self.check_fitted()
        k = min(check_k(k), max(1, self.n_items))
        rows, _ = as_indices(items, self.n_items, "item")
        if len(rows) == 0:
            raise InputError("the history names no item", hint="give at least one item the model knows")
        row = np.unique(np.asarray(rows, dtype=np.int64)).astype(np.int32)  # as fold-in reads a history
        return self.history_top_k(row, k, self.item_mask(filter_items))

    def history_top_k(self, row: np.ndarray, k: int,
                      item_mask: Optional[np.ndarray]) -> Tuple[np.ndarray, np.ndarray]:
        """Top ``k`` for the anonymous history ``row`` (sorted unique item indices, int32),
        excluding its items and those ``item_mask`` marks: the ranking of
        :meth:`score_history`. Factor models override it to rank the vector fold-in would
        give the history."""
        scores = np.ascontiguousarray(self.score_history(row), dtype=np.float32)
        return single_user.top_k_scores(scores, k, row, item_mask)

    def score_history(self, items: np.ndarray) -> np.ndarray:
        """Every item's score (1, n_items) for an anonymous history ``items`` (sorted unique
        indices), for a family that scores a history directly (item-item models,
        popularity); refused here."""
        raise InputError(f"a {type(self).__name__} model cannot score an anonymous history",
                         hint=f"use a {family_names('supports_fold_in')} model")

    def recommend_frame(self, user_ids: Optional[IdsArg] = None, k: int = 10,
                        filter_items: Optional[IdsArg] = None, unknown_users: str = "refuse",
                        **kwargs) -> pd.DataFrame:
        """Top-k as a table of the original ids: columns user, item, score, rank.

        ``user_ids`` is one id or a sequence of ids (default every user), in output order;
        ``filter_items`` item ids never to show. ``unknown_users`` says what an id the model
        does not know gets (:mod:`.fallback`): ``"refuse"`` (an :class:`InputError` naming
        it), ``"skip"`` (no rows; ``frame.attrs["skipped_users"]`` counts them) or
        ``"popular"`` (the items most training users have, as ``recommend --unknown-users
        popular`` writes them; a fifth column ``source`` then says ``popular`` or
        ``personal`` on every row). Other arguments as for :meth:`recommend`.
        """
        check_unknown_users(unknown_users)
        filtered = None if filter_items is None else self.item_indices(filter_items)
        if user_ids is None or unknown_users == "refuse":
            try:
                users = None if user_ids is None else self.user_indices(user_ids)
            except InputError as exc:  # the way out belongs to this call: its unknown_users
                raise InputError(exc.message, path=exc.path, hint=f"{exc.hint}, or pass `unknown_users=\"skip\"` "
                                 "to leave them out or `unknown_users=\"popular\"` for the model's fallback list") from None
            items, scores = self.recommend(users, k=k, filter_items=filtered, **kwargs)
            users = np.arange(self.n_users) if users is None else users
            frame = block_to_frame(self, users, items, scores)
            return frame if unknown_users != "popular" else with_sources(frame, np.zeros(len(frame), dtype=bool))
        ids = id_texts(user_ids)
        rows = self.user_indices(ids, strict=False)
        known = rows[rows >= 0]
        if len(known):
            items, scores = self.recommend(known, k=k, filter_items=filtered, **kwargs)
        else:  # every id unknown: no list of the model's own
            width = min(check_k(k), max(1, self.n_items))
            items, scores = np.empty((0, width), dtype=np.int64), np.empty((0, width), dtype=np.float32)
        if unknown_users == "skip":
            frame = block_to_frame(self, known, items, scores)
            frame.attrs["skipped_users"] = len(set(ids[i] for i in np.flatnonzero(rows < 0)))
            return frame
        return lists_frame(self, ids, rows, items, scores, self.item_mask(filtered))

    # -- persistence ------------------------------------------------------------------------
    def save(self, target) -> None:
        """Save to a ``.npz`` path (written atomically) or a binary file object."""
        self.check_fitted()
        save_model(
            target, type(self).__name__, self.get_params(),
            self.get_attrs(),
            self.user_ids, self.item_ids, self.train_, self.get_arrays(), verify=self._check_loadable,
        )

    def _check_loadable(self, source) -> None:
        """What is written is what loads: the archive just written (``source``) goes through
        :func:`load`, the checks of every later run, and the loaded model must give finite
        scores to its first users; otherwise a one-line :class:`InputError`.

        A model whose numbers overflowed (infinite confidences, feature weights, factors)
        would otherwise be saved, and fail at the next load or rank nothing there.
        """
        loaded = load(source, expected=type(self))
        if loaded.n_users == 0 or loaded.n_items == 0:
            return
        probed = probe_unrankable(loaded.score_users, loaded.n_users)
        if probed is not None:
            large = [f"`{p}`" for p in self.SCALING_PARAMETERS]
            raise InputError(f"every score of its first {probed:,} users is NaN or infinite: it would rank "
                             "nothing", hint="a parameter overflowed the numbers: lower " + (" or ".join(large)
                                                                                           or "the largest one"))

    @classmethod
    def load(cls, source) -> "Recommender":
        """Load a model saved by :meth:`save` (any model class when called on the base)."""
        return load(source, expected=cls)


def load(source, expected: Type[Recommender] = Recommender) -> Recommender:
    """Load any mrec-warp model file; the class comes from the file's metadata.

    Every array is validated before use (see :mod:`~mrec_warp.models.persistence`); a
    damaged or crafted file is a one-line :class:`~mrec_warp.errors.InputError`. A path
    must name a regular file, checked before it is opened (a FIFO would block the open,
    ``/dev/zero`` would be read until memory runs out): the check every command's model
    read goes through.
    """
    if not hasattr(source, "read"):
        check_readable(source, "model file", empty_hint=f"a model file is written by training; {MODEL_FILE_HINT}")
    cls, params, attrs, user_ids, item_ids, train, arrays = load_model(source, REGISTRY, expected)
    name = source_name(source)
    model = cls(**params)
    model.user_ids, model.item_ids, model.train_ = user_ids, item_ids, train
    try:
        model.check_params()  # the checks training makes, on the file's parameters
        if attrs.get("id_encoding_", "utf-8") not in ("utf-8", "latin-1"):  # the two a model is written with
            raise ValueError(f"id encoding {str(attrs['id_encoding_'])[:40]!r} is not utf-8 or latin-1")
        model._check_file_params()
        model.set_arrays(arrays)
    except (KeyError, ValueError, TypeError) as exc:
        message = exc.message if isinstance(exc, InputError) else str(exc)
        # the file's parameters, not ones the user set: plain names, never shown as flags
        message = spell_parameters(message, lambda name, value: name if value is None else f"{name}={value}")
        raise InputError(f"model file is invalid: {message}", path=name, hint=MODEL_FILE_HINT) from None
    model.set_attrs(attrs)
    return model


def provides(model: Union[Recommender, Type[Recommender]], method: str) -> bool:
    """Whether the family of ``model`` (a model or class) does what ``method`` promises: it
    overrides the base's refusing default (:meth:`Recommender.explain_frame`,
    :meth:`~Recommender.merge_sub_models`)."""
    cls = model if isinstance(model, type) else type(model)
    return getattr(cls, method) is not getattr(Recommender, method)


def explains(model: Union[Recommender, Type[Recommender]]) -> bool:
    """Whether the family of ``model`` explains its scores (:meth:`Recommender.explain_frame`)."""
    return provides(model, "explain_frame")


def open_model(model: Union[PathLike, Recommender]) -> Tuple[Recommender, Optional[str]]:
    """(model, the file it came from): ``model`` itself, or loaded from a model file."""
    if isinstance(model, Recommender):
        return model, None
    return load(model), str(model)
