import sys
from pathlib import Path

# The independent ARPA scorer (tests/arpa_scorer.py) is imported by several tests.
sys.path.insert(0, str(Path(__file__).parent))
