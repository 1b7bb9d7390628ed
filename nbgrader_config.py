"""nbgrader configuration for the course.

`solutions/` holds the instructor source (answers and hidden tests) and `notebooks/` the
student release that `make release` generates from it.  The gradebook is SQLite.
"""
c = get_config()  # noqa: F821  (nbgrader injects get_config)

c.CourseDirectory.root = "."
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "notebooks"
c.CourseDirectory.course_id = "transformers-by-counting"
# The stub a learner sees where the solution was.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
# Every notebook in the course runs in under two minutes; a cell gets at most 60 s.
c.Execute.timeout = 60
