"""``python -m mrec_warp`` runs the CLI."""
from .cli import main

main(prog_name="mrec-warp")
