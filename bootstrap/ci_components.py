"""Re-exports for one release: the bootstrap is now ``bootstrap.config``, ``bootstrap.access`` and
``bootstrap.components``; import those (this file goes with the next release)."""

from bootstrap.access import *  # noqa: F403
from bootstrap.components import *  # noqa: F403
from bootstrap.config import *  # noqa: F403
