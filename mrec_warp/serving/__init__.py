"""``mrec-warp serve``: a model file behind an HTTP JSON service (the ``[serve]`` extra).

:mod:`.holder` loads, validates and swaps the model (reload on a file change or SIGHUP);
:mod:`.requests` turns query strings and JSON bodies into checked arguments; :mod:`.app`
is the Starlette application. Starlette and uvicorn are imported only here, so the rest of
the package never needs them.
"""
