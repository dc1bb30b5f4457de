"""Maintenance-window node rotation: policy, windows, derivation, selection, gates, the machine.

Callers import each rule module by name; each documents its part: ``policy`` (fields,
validation, resolve), ``manifest`` (policy from a parsed manifest), ``windows`` (membership,
P/D/gap, concrete intervals), ``derive`` + ``findings`` (t_rot, A, G, C and the finding codes),
``selection`` (eligibility, census, order), ``labelselector`` (the policies' NodePool
selectors), ``gates`` (start gates), ``machine`` (one rotation step), ``annotations`` (every
key rotation state lives in) and ``constants``.
"""
