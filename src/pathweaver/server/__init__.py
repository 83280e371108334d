"""The MCP server: thin tools, resources and prompts over ``pathweaver.service.Pathweaver``.

Entry points live in ``pathweaver.server.app`` (``build_server``, ``run_server``); importing this package is cheap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pathweaver.config import Settings
from pathweaver.server.background import IndexManager
from pathweaver.server.roots import Roots

if TYPE_CHECKING:
    from pathweaver.service import Pathweaver


@dataclass
class ServerState:
    """What every tool and resource handler needs: the service, the allowed roots and the index manager."""

    service: Pathweaver
    roots: Roots
    manager: IndexManager
    settings: Settings
