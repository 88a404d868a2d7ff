"""A record on the wire: what the kernel's probe (``autograder/checks/_probe.py``) sends as one
``display_data`` message of type :data:`RECORD_MIME`, the kernel's output cap
(``sandbox/outcap.py``) never cuts, and the grading process seals (``autograde/records.py``).
Plain data, imported by the graded kernel too.
"""

RECORD_MIME = "application/vnd.course-record+json"
MAX_RECORD = 64 * 2**20  # bytes; the probe sends no larger record, the grader keeps none
# bytes of one message from the kernel (a record's JSON inside the message's JSON, escaped):
# a larger message is dropped by ZeroMQ before it reaches the grader's memory
MAX_MESSAGE = 3 * MAX_RECORD
