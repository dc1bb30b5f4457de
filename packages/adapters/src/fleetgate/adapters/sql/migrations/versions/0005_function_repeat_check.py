# ruff: noqa: E501  (the 0004 functions' text, kept byte for byte: its digest must match)
"""A refusal looks for the request id's earlier placement in the function; the batch bounds its waits.

``fleetgate_admit`` (revision 0003) now answers ``duplicate`` instead of a refusal (or an
unknown node) when the request id already has a placement, so the caller no longer reads for
one after a refusal. ``fleetgate_admit_batch`` (0004) carries ``SET lock_timeout`` itself, so a
batch sends no ``SET LOCAL`` first. Both are reinstalled (the batch function's digest covers
``fleetgate_admit``'s). Only PostgreSQL has them.

The downgrade reinstalls the functions as revision 0004 left them: their text is kept here, byte
for byte, with the digests that code recorded, so the 0004 code finds them current again. (The
code of this revision finds them stale and admits in-process, never by the old function.)

Revision ID: 0005_function_repeat_check
Revises: 0004_admit_batch_function
Create Date: 2026-12-02
"""

from __future__ import annotations

from typing import Final

from alembic import op

from fleetgate.adapters.sql.postgres import admit_function, batch_function, stored_functions

revision = "0005_function_repeat_check"
down_revision = "0004_admit_batch_function"
branch_labels = None
depends_on = None

#: ``fleetgate_admit`` as revision 0004 installed it, and the digest it recorded.
ADMIT_0004: Final = """CREATE OR REPLACE FUNCTION fleetgate_admit(p_namespace text, p_node text, p_cpus bigint, p_memory_mb bigint, p_disk_gb bigint, p_demand double precision, p_target_load double precision, p_demand_clause boolean, p_hard boolean, p_now double precision, p_id text, p_request_id text) RETURNS TABLE(fg_outcome text, fg_claim_id text, fg_refused json, fg_node json) LANGUAGE plpgsql AS $fleetgate$
#variable_conflict use_column
DECLARE
  v_claim_id text;
  v_row record;
  v_node record;
BEGIN
  -- 1. The namespace side: the active claim within its limit (hard and advisory alike) ...
  UPDATE claims SET used_cpus=(claims.used_cpus + p_cpus::BIGINT), used_memory_mb=(claims.used_memory_mb + p_memory_mb::BIGINT), used_disk_gb=(claims.used_disk_gb + p_disk_gb::BIGINT), updated_at=p_now WHERE claims.active_namespace = p_namespace::VARCHAR AND claims.expires_at > p_now AND claims.used_cpus + p_cpus::BIGINT <= claims.limit_cpus AND claims.used_memory_mb + p_memory_mb::BIGINT <= claims.limit_memory_mb AND claims.used_disk_gb + p_disk_gb::BIGINT <= claims.limit_disk_gb RETURNING claims.id, claims.namespace, claims.limit_cpus, claims.limit_memory_mb, claims.limit_disk_gb, claims.used_cpus, claims.used_memory_mb, claims.used_disk_gb, claims.state, claims.active_namespace, claims.expires_at, claims.created_at, claims.updated_at INTO v_row;
  IF FOUND THEN
    v_claim_id := v_row.id;
  ELSIF p_hard THEN
    UPDATE claims SET updated_at=claims.updated_at WHERE claims.active_namespace = p_namespace::VARCHAR AND claims.expires_at > p_now RETURNING claims.id, claims.namespace, claims.limit_cpus, claims.limit_memory_mb, claims.limit_disk_gb, claims.used_cpus, claims.used_memory_mb, claims.used_disk_gb, claims.state, claims.active_namespace, claims.expires_at, claims.created_at, claims.updated_at INTO v_row;
    IF FOUND THEN
      RETURN QUERY SELECT 'refused_claim'::text, NULL::text, row_to_json(v_row)::json, NULL::json;
      RETURN;
    END IF;
  ELSE
    -- ... an advisory claim past its limit: charged, the overage is the caller's to charge.
    UPDATE claims SET used_cpus=(claims.used_cpus + p_cpus::BIGINT), used_memory_mb=(claims.used_memory_mb + p_memory_mb::BIGINT), used_disk_gb=(claims.used_disk_gb + p_disk_gb::BIGINT), updated_at=p_now WHERE claims.active_namespace = p_namespace::VARCHAR AND claims.expires_at > p_now RETURNING claims.id, claims.namespace, claims.limit_cpus, claims.limit_memory_mb, claims.limit_disk_gb, claims.used_cpus, claims.used_memory_mb, claims.used_disk_gb, claims.state, claims.active_namespace, claims.expires_at, claims.created_at, claims.updated_at INTO v_row;
    IF FOUND THEN
      RETURN QUERY SELECT 'claim_over'::text, v_row.id::text, row_to_json(v_row)::json, NULL::json;
      RETURN;
    END IF;
  END IF;
  IF v_claim_id IS NULL THEN
    -- ... or, with no active claim, the cluster's unclaimed sums.
    UPDATE cluster SET unclaimed_used_cpus=(cluster.unclaimed_used_cpus + p_cpus::BIGINT), unclaimed_used_memory_mb=(cluster.unclaimed_used_memory_mb + p_memory_mb::BIGINT), unclaimed_used_disk_gb=(cluster.unclaimed_used_disk_gb + p_disk_gb::BIGINT), updated_at=p_now WHERE cluster.id = 1::INTEGER AND cluster.unclaimed_used_cpus + p_cpus::BIGINT <= cluster.total_cpus - cluster.claimed_cpus AND cluster.unclaimed_used_memory_mb + p_memory_mb::BIGINT <= cluster.total_memory_mb - cluster.claimed_memory_mb AND cluster.unclaimed_used_disk_gb + p_disk_gb::BIGINT <= cluster.total_disk_gb - cluster.claimed_disk_gb RETURNING cluster.id, cluster.total_cpus, cluster.total_memory_mb, cluster.total_disk_gb, cluster.claimed_cpus, cluster.claimed_memory_mb, cluster.claimed_disk_gb, cluster.unclaimed_used_cpus, cluster.unclaimed_used_memory_mb, cluster.unclaimed_used_disk_gb, cluster.updated_at INTO v_row;
    IF NOT FOUND THEN
      UPDATE cluster SET updated_at=cluster.updated_at WHERE cluster.id = 1::INTEGER RETURNING cluster.id, cluster.total_cpus, cluster.total_memory_mb, cluster.total_disk_gb, cluster.claimed_cpus, cluster.claimed_memory_mb, cluster.claimed_disk_gb, cluster.unclaimed_used_cpus, cluster.unclaimed_used_memory_mb, cluster.unclaimed_used_disk_gb, cluster.updated_at INTO v_row; IF NOT FOUND THEN RETURN QUERY SELECT 'no_cluster'::text, NULL::text, NULL::json, NULL::json; RETURN; END IF; RETURN QUERY SELECT 'refused_cluster'::text, NULL::text, row_to_json(v_row)::json, NULL::json; RETURN;
    END IF;
    PERFORM claims.id 
FROM claims 
WHERE claims.active_namespace = p_namespace::VARCHAR AND claims.expires_at > p_now FOR SHARE NOWAIT;
    IF FOUND THEN
      RETURN QUERY SELECT 'claim_appeared'::text, NULL::text, NULL::json, NULL::json;
      RETURN;
    END IF;
  END IF;
  -- 2. The node, under the node guard (with the demand clause unless it is waived).
  IF p_demand_clause THEN
    UPDATE nodes SET used_cpus=(nodes.used_cpus + p_cpus::BIGINT), used_memory_mb=(nodes.used_memory_mb + p_memory_mb::BIGINT), used_disk_gb=(nodes.used_disk_gb + p_disk_gb::BIGINT), expected_demand=(nodes.expected_demand + CAST(p_demand AS DOUBLE PRECISION)), updated_at=p_now WHERE nodes.name = p_node::VARCHAR AND nodes.schedulable IS true AND nodes.used_cpus + p_cpus::BIGINT <= nodes.limit_cpus AND nodes.used_memory_mb + p_memory_mb::BIGINT <= nodes.limit_memory_mb AND nodes.used_disk_gb + p_disk_gb::BIGINT <= nodes.limit_disk_gb AND (nodes.cpu_schedulable IS NULL OR coalesce(nodes.cpu_load_1, CAST(0.0 AS DOUBLE PRECISION)) + nodes.expected_demand <= CAST(p_target_load AS DOUBLE PRECISION) * nodes.cpu_schedulable) RETURNING nodes.name, nodes.pool, nodes.labels, nodes.threads, nodes.memory_mb, nodes.disk_gb, nodes.limit_cpus, nodes.limit_memory_mb, nodes.limit_disk_gb, nodes.used_cpus, nodes.used_memory_mb, nodes.used_disk_gb, nodes.expected_demand, nodes.cpu_load_1, nodes.cpu_schedulable, nodes.schedulable, nodes.metrics_at, nodes.created_at, nodes.updated_at INTO v_node;
  ELSE
    UPDATE nodes SET used_cpus=(nodes.used_cpus + p_cpus::BIGINT), used_memory_mb=(nodes.used_memory_mb + p_memory_mb::BIGINT), used_disk_gb=(nodes.used_disk_gb + p_disk_gb::BIGINT), expected_demand=(nodes.expected_demand + CAST(p_demand AS DOUBLE PRECISION)), updated_at=p_now WHERE nodes.name = p_node::VARCHAR AND nodes.schedulable IS true AND nodes.used_cpus + p_cpus::BIGINT <= nodes.limit_cpus AND nodes.used_memory_mb + p_memory_mb::BIGINT <= nodes.limit_memory_mb AND nodes.used_disk_gb + p_disk_gb::BIGINT <= nodes.limit_disk_gb RETURNING nodes.name, nodes.pool, nodes.labels, nodes.threads, nodes.memory_mb, nodes.disk_gb, nodes.limit_cpus, nodes.limit_memory_mb, nodes.limit_disk_gb, nodes.used_cpus, nodes.used_memory_mb, nodes.used_disk_gb, nodes.expected_demand, nodes.cpu_load_1, nodes.cpu_schedulable, nodes.schedulable, nodes.metrics_at, nodes.created_at, nodes.updated_at INTO v_node;
  END IF;
  IF NOT FOUND THEN
    UPDATE nodes SET updated_at=nodes.updated_at WHERE nodes.name = p_node::VARCHAR RETURNING nodes.name, nodes.pool, nodes.labels, nodes.threads, nodes.memory_mb, nodes.disk_gb, nodes.limit_cpus, nodes.limit_memory_mb, nodes.limit_disk_gb, nodes.used_cpus, nodes.used_memory_mb, nodes.used_disk_gb, nodes.expected_demand, nodes.cpu_load_1, nodes.cpu_schedulable, nodes.schedulable, nodes.metrics_at, nodes.created_at, nodes.updated_at INTO v_row; IF NOT FOUND THEN RETURN QUERY SELECT 'no_node'::text, NULL::text, NULL::json, NULL::json; RETURN; END IF; RETURN QUERY SELECT 'refused_node'::text, NULL::text, row_to_json(v_row)::json, NULL::json; RETURN;
  END IF;
  -- 3. The placement row (a duplicate request id fails here, as on the in-process path).
  INSERT INTO placements (id, namespace, node, cpus, memory_mb, disk_gb, demand, admitted_at, request_id, claim_id) VALUES (p_id, p_namespace, p_node, p_cpus, p_memory_mb, p_disk_gb, p_demand, p_now, p_request_id, v_claim_id);
  RETURN QUERY SELECT 'admitted'::text, v_claim_id, NULL::json, row_to_json(v_node);
END
$fleetgate$"""
ADMIT_0004_DIGEST: Final = "b5880286e1c1c292fdbc609ed2769f48"
#: ``fleetgate_admit_batch`` as revision 0004 installed it, and the digest it recorded.
BATCH_0004: Final = """CREATE OR REPLACE FUNCTION fleetgate_admit_batch(p_namespace text[], p_node text[], p_cpus bigint[], p_memory_mb bigint[], p_disk_gb bigint[], p_demand double precision[], p_target_load double precision[], p_demand_clause boolean[], p_hard boolean[], p_now double precision[], p_id text[], p_request_id text[]) RETURNS TABLE(fg_index integer, fg_outcome text, fg_claim_id text, fg_refused json, fg_node json) LANGUAGE plpgsql AS $fleetgate$
DECLARE
  v_constraint text;
BEGIN
  FOR i IN 1 .. coalesce(array_length(p_namespace, 1), 0) LOOP
    fg_index := i - 1;
    BEGIN
      SELECT * INTO fg_outcome, fg_claim_id, fg_refused, fg_node
        FROM fleetgate_admit(p_namespace[i], p_node[i], p_cpus[i], p_memory_mb[i], p_disk_gb[i], p_demand[i], p_target_load[i], p_demand_clause[i], p_hard[i], p_now[i], p_id[i], p_request_id[i]);
      IF fg_outcome <> 'admitted' THEN
        -- Not admitted: undo whatever it charged (an advisory claim, the cluster's sums).
        RAISE EXCEPTION USING ERRCODE = 'FGU01', MESSAGE = 'fleetgate: element not admitted';
      END IF;
    EXCEPTION
      WHEN SQLSTATE 'FGU01' THEN
        NULL;  -- rolled back; its outcome and refused row stand
      WHEN unique_violation THEN
        GET STACKED DIAGNOSTICS v_constraint = CONSTRAINT_NAME;
        IF v_constraint IS DISTINCT FROM 'uq_placements_namespace_request_id' THEN
          RAISE;  -- not a repeated request id: the whole batch fails, as the statement would
        END IF;
        fg_outcome := 'duplicate'; fg_claim_id := NULL; fg_refused := NULL; fg_node := NULL;
      WHEN deadlock_detected THEN
        fg_outcome := 'deadlock'; fg_claim_id := NULL; fg_refused := NULL; fg_node := NULL;
      WHEN lock_not_available THEN
        fg_outcome := 'lock_held'; fg_claim_id := NULL; fg_refused := NULL; fg_node := NULL;
      WHEN serialization_failure THEN
        fg_outcome := 'serialization_failure'; fg_claim_id := NULL; fg_refused := NULL; fg_node := NULL;
    END;
    RETURN NEXT;
  END LOOP;
END
$fleetgate$"""
BATCH_0004_DIGEST: Final = "162d0d52e2c1f395b3b00d25af79126d"


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in [
            *admit_function.install_statements(),
            *batch_function.install_statements(),
        ]:
            op.get_bind().exec_driver_sql(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in [
            *stored_functions.install_statements(
                admit_function.SIGNATURE, ADMIT_0004, ADMIT_0004_DIGEST
            ),
            *stored_functions.install_statements(
                batch_function.SIGNATURE, BATCH_0004, BATCH_0004_DIGEST
            ),
        ]:
            op.get_bind().exec_driver_sql(statement)
