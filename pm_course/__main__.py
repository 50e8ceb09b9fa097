"""``python -m pm_course`` is ``pm-course``."""
from .cli import main

main()
