"""Answers to each chapter's exercises written as a student would: right ones (GOOD)
and the catalogued wrong ones (WRONG), shared by the check tests and the verdict tests."""
