"""The PostgreSQL room: its dialect plugin and the admission as stored functions (PL/pgSQL).

Generic code reaches what is here only through the ``DialectSupport`` port its plugin implements
(the import contract "Dialect plugins depend on the generic SQL store, never the reverse").
"""
