"""Internals of ``course-grade`` (see ``autograder/grade.py``).

- ``runner``: run one untrusted command with limits (the place a sandbox plugs in);
- ``limits``: sets the rlimits inside that command before it execs nbgrader;
- ``course``: the template course (nbgrader generate_assignment) and per-student course folders;
- ``submissions``: students, zips, and finding notebooks by name;
- ``student``: grading one student, and the status of each CSV row;
- ``feedback``: the nbgrader preprocessor that keeps hidden tests out of feedback;
- ``results``: the parent's store (one JSON per student), grades.csv, the class gradebook.
"""
