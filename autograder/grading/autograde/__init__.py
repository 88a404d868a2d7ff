"""The grading process: one limited process per student, nbgrader's autograde and feedback.

``nbgrader_main.student_main(STUDENT, A, ...)``, in a fork of the warm grading process
(``warm``), runs in the student's course folder. It prepares each assignment's kernel package
(``kernel_package``), runs the notebooks in sandboxed kernels (``preprocessors.SealedExecute``
seals the records they send: ``records``), judges the records (``verdict``) and writes one
result per assignment (``assignment_result``), which is all the parent reads.
"""
