"""Workbench sessions (Pro): an agent loop of model turns that edit one course through typed tools.

``WorkbenchKind`` plugs the loop into the durable runtime; ``WorkbenchSessions`` is the control plane the API
calls (create, snapshot, messages, cancel). Importing this package registers ``model.output_reset``.

The worker running the kind passes ``services`` with ``models`` (a :class:`~openmaic.models.ModelRouter`; slot
``agent`` for turns, ``course.content.<kind>`` for ``generate_scene``) and ``log`` (the
:class:`~openmaic.events.log.EventLog`, for reading and writing course streams).
"""

from openmaic.workbench.events import ModelOutputReset
from openmaic.workbench.fold import SessionState, fold_session, history_messages
from openmaic.workbench.kind import WorkbenchKind
from openmaic.workbench.service import SessionSnapshot, WorkbenchSessions, session_id_for

__all__ = [
    "ModelOutputReset",
    "SessionSnapshot",
    "SessionState",
    "WorkbenchKind",
    "WorkbenchSessions",
    "fold_session",
    "history_messages",
    "session_id_for",
]
