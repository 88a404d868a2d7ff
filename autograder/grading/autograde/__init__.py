"""The grading process: one limited process per student, nbgrader's autograde and feedback.

``python -m autograder.grading.autograde.nbgrader_main autograde+feedback STUDENT A ...`` runs
in the student's course folder. It prepares each assignment's kernel package
(``kernel_package``), runs the notebooks in sandboxed kernels (``preprocessors.QueuedExecute``
seals the records they send: ``records``), judges the records (``verdict``) and writes one
result per assignment (``assignment_result``), which is all the parent reads.
"""
