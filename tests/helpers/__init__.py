"""What the tests share: class builders, graded classes, answers written as a student would."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
