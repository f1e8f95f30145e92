"""The package version, in a module of its own so that nothing needs ``import mrec_warp`` for it."""
__version__ = "0.1.0"
