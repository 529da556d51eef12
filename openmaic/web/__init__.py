"""The web workbench's static files (HTML, CSS and ES modules), served by :mod:`openmaic.api.web`."""
