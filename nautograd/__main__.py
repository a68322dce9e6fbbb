"""``python -m nautograd {bench,warmup,info}``."""

from .cli import main

if __name__ == "__main__":  # (docs tools import every module of the package)
    main()
