"""``python -m nautograd {bench,warmup,info}``."""

from .cli import main

main()
