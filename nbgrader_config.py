"""nbgrader configuration: exercises/ is the source folder; everything generated lives in course/."""
import os

c = get_config()  # noqa: F821  (provided by nbgrader)

ROOT = os.path.dirname(os.path.abspath(__file__))
COURSE = os.environ.get("PM_COURSE_DIR", os.path.join(ROOT, "course"))

c.CourseDirectory.root = COURSE
# nbgrader's folders are relative to the root; the sources stay in the repository.
c.CourseDirectory.source_directory = os.path.relpath(os.path.join(ROOT, "exercises"), COURSE)
c.CourseDirectory.release_directory = "release"
c.CourseDirectory.submitted_directory = "submitted"
c.CourseDirectory.autograded_directory = "autograded"
c.CourseDirectory.feedback_directory = "feedback"
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(COURSE, "gradebook.db")
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback"]

# Student code can loop forever: stop each cell after 10 s and grade what ran.
c.Execute.timeout = 10
c.Execute.interrupt_on_timeout = True
