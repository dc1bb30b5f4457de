"""The ``fleetgate`` command line: the root group and ``main`` (``main``), the server's and the
offline commands (``commands``), their option types (``params``), the command groups (``group``),
shell completion (``completion``), and what ``check`` prints (``checkreport``) and ``db`` does
(``db``). The client's commands live with the client (``fleetgate.apps.client``)."""
