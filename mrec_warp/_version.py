"""The package version, on the ground floor so that no module needs ``import mrec_warp`` for it."""
__version__ = "0.1.0"
