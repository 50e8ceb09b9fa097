"""``python -m pm_course`` is ``pm-course``."""
from pm_course.cli import main

main()
