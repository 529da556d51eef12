"""The one-way import of an OpenMAIC 1.1.x browser's data (:mod:`openmaic.browser_import.service`).

Importing the package registers the import stream's event types (:mod:`openmaic.browser_import.events`).
"""

from openmaic.browser_import import events as events  # noqa: F401 - registers the event types
