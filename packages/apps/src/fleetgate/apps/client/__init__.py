"""The client of the fleetgate HTTP API and its commands (``fleetgate nodes``, ``place``, ...).

Its rooms: ``api`` (the typed client, public as :mod:`fleetgate.client`), ``transport`` (HTTP on
the standard library), ``bodies`` (the answers' wire format), ``defaults`` (where the API is),
``output`` and ``views`` (how an answer prints), and the commands: ``options`` (what every
command takes), ``calls`` (one call, its error and exit code), ``reads`` (the listings),
``verbs`` (the writes) and ``watch`` (``--watch``). Nothing here imports the server, pydantic or
rich (an import-linter contract), so a client command starts at once.
"""
