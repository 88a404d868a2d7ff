"""The ``course-grade`` process: the trusted parent, the only writer of the class's results.

See ``autograder/grading/__init__.py`` for the three processes; a row's status comes from
``status.row_status``, called by ``student.py``.
"""
