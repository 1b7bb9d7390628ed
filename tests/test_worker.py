"""The grading worker (course_tools.worker) outside a job: what its logs keep."""
from __future__ import annotations


def test_worker_logs_leave_out_the_checksum_warning_every_student_gets():
    """Hidden tests make every test cell's checksum differ from the release's; nbgrader warns
    about it for every student, honest or not, which would bury real problems in the logs."""
    import logging

    from course_tools.worker import _expected_noise

    def record(*args, msg="Attribute '%s' for cell %s has changed! (should be: %s, got: %s)"):
        return logging.LogRecord("nbgrader", logging.WARNING, __file__, 1, msg, args, None)

    assert not _expected_noise(record("checksum", "t-a", "x", "y"))
    assert _expected_noise(record("points", "t-a", 2.0, 5.0))   # a changed cell still shows
    assert _expected_noise(record(msg="Missing grade cell t-a encountered, adding to notebook"))
