-- holdcommit 0.3.0 to 0.4.0.  Also the second half of 0.4.0's install script,
-- which make joins from sql/holdcommit--0.3.0.sql and this file: whatever is
-- written here runs on a fresh install too, on empty tables.
\echo Use "ALTER EXTENSION holdcommit UPDATE TO '0.4.0'" to load this file. \quit

-- A library running in other sessions learns of an update from a change to
-- pg_proc (src/core/version.c): this one changes nothing else.
ALTER FUNCTION @extschema@.hc_check() VOLATILE;

------------------------------------------------------------------------------
-- A hot product spreads itself (issue 36, part 4)
------------------------------------------------------------------------------

-- When reserves of a product wait for each other, holdcommit spreads its
-- stock over parts by itself, in a background worker's transaction of its
-- own, and gathers them back once the rush has been over for
-- holdcommit.stock_gather_after; never below the parts an operator set with
-- hc_stock_spread, the product's floor.  One row per product that has a
-- floor or has been spread automatically (src/stock/auto_spread.c); a
-- product without one has a floor of 1.  Only the automatic runs and
-- hc_stock_spread write it.
CREATE TABLE @extschema@.hc_stock_spreads (
    product_id      text PRIMARY KEY,
    min_parts       smallint NOT NULL DEFAULT 1 CHECK (min_parts BETWEEN 1 AND 256),
    changed_at      timestamptz NOT NULL,  -- the last change of its parts by any of them
    spreads         bigint NOT NULL DEFAULT 0,  -- automatic spreads and gathers so far
    gathers         bigint NOT NULL DEFAULT 0,
    failures        bigint NOT NULL DEFAULT 0,  -- automatic runs that changed nothing: a part held, the stall bound
    last_spread_at  timestamptz,
    last_gather_at  timestamptz,
    last_waiters    integer,           -- the reserves at once that decided the last spread
    last_parts_from smallint,          -- the last automatic change: parts before and after
    last_parts_to   smallint,
    last_stall_ms   double precision,  -- how long the last automatic run held part 0, commit included
    max_stall_ms    double precision,
    last_failure    text,              -- why the last failed run changed nothing, and when
    last_failure_at timestamptz
);
COMMENT ON TABLE @extschema@.hc_stock_spreads IS
    'Per product: the fewest parts an operator set (hc_stock_spread), and what holdcommit''s automatic spreads and gathers did: when, sized by how many waiters, how long they held part 0.';
SELECT pg_catalog.pg_extension_config_dump('@extschema@.hc_stock_spreads', '');

-- The products an operator spread under 0.3.0 keep those parts as their floor.
INSERT INTO @extschema@.hc_stock_spreads (product_id, min_parts, changed_at)
SELECT p.product_id, pg_catalog.count(*)::pg_catalog.int2, pg_catalog.max(p.updated_at)
  FROM @extschema@.hc_stock_parts p
 GROUP BY p.product_id
HAVING pg_catalog.count(*) OPERATOR(pg_catalog.>) 1;

CREATE FUNCTION @extschema@.hc_stock_auto_spread(product_id text, parts integer)
RETURNS integer
AS 'MODULE_PATHNAME', 'hc_stock_auto_spread' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.hc_stock_auto_spread(text, integer) IS
    'What an automatic spread or gather runs, in the caller''s transaction: the product''s parts to parts (never below its floor), part 0 taken waiting, the others without (55P03); counted in hc_stock_spreads; returns the parts it has (operator, tests).';
REVOKE ALL ON FUNCTION @extschema@.hc_stock_auto_spread(text, integer) FROM PUBLIC;

CREATE FUNCTION @extschema@.hc_stock_waits(
    OUT product_id text, OUT reserving integer, OUT peak integer, OUT last_overlap timestamptz,
    OUT spreading boolean, OUT parts integer)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'hc_stock_waits' LANGUAGE C VOLATILE STRICT;
COMMENT ON FUNCTION @extschema@.hc_stock_waits() IS
    'The products of this database whose reserves holdcommit watches, from shared memory (empty without shared_preload_libraries): transactions reserving each now, the most at once in its last rush, the last overlap, a spread under way.';
REVOKE ALL ON FUNCTION @extschema@.hc_stock_waits() FROM PUBLIC;

-- The update grants nothing (a grant made here would be an initial
-- privilege, which pg_dump leaves out): an operator granted before
-- (hc_asset_add is granted to operators only) must be granted again to see
-- what 0.4.0 adds for operators.
DO $$
DECLARE
    ungranted text;
BEGIN
    SELECT pg_catalog.string_agg(DISTINCT a.grantee::pg_catalog.regrole::pg_catalog.text, ', ') INTO ungranted
      FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
     WHERE p.oid OPERATOR(pg_catalog.=) '@extschema@.hc_asset_add(text, text)'::pg_catalog.regprocedure
       AND a.grantee OPERATOR(pg_catalog.<>) 0 AND a.grantee OPERATOR(pg_catalog.<>) p.proowner;
    IF ungranted IS NOT NULL THEN
        RAISE WARNING 'these operators cannot see the automatic spreads (hc_stock_spreads, hc_stock_waits, hc_stock_auto_spread) until they are granted again: %', ungranted
              USING HINT = 'For each: SELECT hc_grant_operator(''role'').';
    END IF;
END
$$;

-- The views operators and monitoring read: what the spreads and gathers did.
-- Their rows as in 0.3.0, then the new ones.
CREATE OR REPLACE VIEW @extschema@.hc_overview AS
    WITH t AS (SELECT pg_catalog.clock_timestamp() AS now)
    SELECT 'assets'::text AS area, s.status AS item,
           (SELECT pg_catalog.count(*) FROM @extschema@.hc_assets a
             WHERE a.status OPERATOR(pg_catalog.=) s.status) AS value
      FROM (VALUES ('AVAILABLE'::text), ('HELD'), ('SOLD')) s (status)
    UNION ALL
    SELECT 'holds', 'active', pg_catalog.count(*)
      FROM @extschema@.hc_reservations r, t
     WHERE r.status OPERATOR(pg_catalog.=) 'HELD' AND r.expires_at OPERATOR(pg_catalog.>) t.now
    UNION ALL
    SELECT 'holds', 'expiring within a minute', pg_catalog.count(*)
      FROM @extschema@.hc_reservations r, t
     WHERE r.status OPERATOR(pg_catalog.=) 'HELD' AND r.expires_at OPERATOR(pg_catalog.>) t.now
       AND r.expires_at OPERATOR(pg_catalog.<=) (t.now OPERATOR(pg_catalog.+) '1 minute'::pg_catalog.interval)
    UNION ALL
    SELECT 'holds', 'expired, not yet swept', pg_catalog.count(*)
      FROM @extschema@.hc_reservations r, t
     WHERE r.status OPERATOR(pg_catalog.=) 'HELD' AND r.expires_at OPERATOR(pg_catalog.<=) t.now
    UNION ALL
    SELECT 'stock', 'active reservations', pg_catalog.count(*)
      FROM @extschema@.hc_stock_reservations r, t
     WHERE r.status OPERATOR(pg_catalog.=) 'RESERVED' AND r.expires_at OPERATOR(pg_catalog.>) t.now
    UNION ALL
    SELECT 'stock', 'reserved units', COALESCE(pg_catalog.sum(i.reserved), 0)::pg_catalog.int8
      FROM @extschema@.hc_inventory i
    UNION ALL
    SELECT 'stock', 'expired, not yet swept', pg_catalog.count(*)
      FROM @extschema@.hc_stock_reservations r, t
     WHERE r.status OPERATOR(pg_catalog.=) 'RESERVED' AND r.expires_at OPERATOR(pg_catalog.<=) t.now
    UNION ALL
    SELECT 'leases', 'held', pg_catalog.count(*)
      FROM @extschema@.hc_locks l
     WHERE l.owner IS NOT NULL
    UNION ALL
    SELECT 'leases', 'stale', pg_catalog.count(*)
      FROM @extschema@.hc_locks l, t
     WHERE l.owner IS NOT NULL
       AND l.heartbeat_at OPERATOR(pg_catalog.+) l.stale_after OPERATOR(pg_catalog.<=) t.now
    UNION ALL
    SELECT 'attempts', 'MANUAL_REVIEW', pg_catalog.count(*)
      FROM @extschema@.hc_attempts a
     WHERE a.status OPERATOR(pg_catalog.=) 'MANUAL_REVIEW'
    UNION ALL
    SELECT 'ledger, last hour', l.event, pg_catalog.count(*)
      FROM @extschema@.hc_ledger l, t
     WHERE l.at OPERATOR(pg_catalog.>) (t.now OPERATOR(pg_catalog.-) '1 hour'::pg_catalog.interval)
     GROUP BY l.event
    UNION ALL
    SELECT 'stock spreads', s.item, s.value
      FROM (SELECT pg_catalog.count(*) FILTER (WHERE n.parts OPERATOR(pg_catalog.>) COALESCE(x.min_parts, 1)) AS spread,
                   COALESCE(pg_catalog.sum(x.spreads), 0)::pg_catalog.int8 AS spreads,
                   COALESCE(pg_catalog.sum(x.gathers), 0)::pg_catalog.int8 AS gathers,
                   COALESCE(pg_catalog.sum(x.failures), 0)::pg_catalog.int8 AS failures,
                   COALESCE(pg_catalog.max(x.max_stall_ms), 0)::pg_catalog.int8 AS stall
              FROM (SELECT p.product_id, pg_catalog.count(*) AS parts
                      FROM @extschema@.hc_stock_parts p GROUP BY p.product_id) n
              FULL JOIN @extschema@.hc_stock_spreads x ON x.product_id OPERATOR(pg_catalog.=) n.product_id) o
     CROSS JOIN LATERAL (VALUES ('products spread beyond their floor'::text, o.spread),
                                ('automatic spreads', o.spreads), ('automatic gathers', o.gathers),
                                ('automatic runs that changed nothing', o.failures),
                                ('longest stall of part 0 (ms)', o.stall)) s (item, value);
CREATE OR REPLACE VIEW @extschema@.hc_metrics AS
    WITH t AS (SELECT pg_catalog.clock_timestamp() AS now)
    SELECT 'assets'::text AS metric, s.status AS label,
           (SELECT pg_catalog.count(*) FROM @extschema@.hc_assets a, t
             WHERE CASE WHEN a.status OPERATOR(pg_catalog.=) 'HELD'
                         AND a.hold_expires_at OPERATOR(pg_catalog.<=) t.now
                        THEN 'HELD_EXPIRED' ELSE a.status END OPERATOR(pg_catalog.=) s.status
           )::pg_catalog.float8 AS value
      FROM (VALUES ('AVAILABLE'::text), ('HELD'), ('HELD_EXPIRED'), ('SOLD')) s (status)
    UNION ALL
    SELECT 'holds', s.status,
           (SELECT pg_catalog.count(*) FROM @extschema@.hc_reservations r
             WHERE r.status OPERATOR(pg_catalog.=) s.status)::pg_catalog.float8
      FROM (VALUES ('HELD'::text), ('COMMITTED'), ('RELEASED'), ('EXPIRED')) s (status)
    UNION ALL
    SELECT 'holds_overdue', m.label, m.value
      FROM (SELECT pg_catalog.count(*)::pg_catalog.float8 AS n,
                   COALESCE(pg_catalog.date_part('epoch', (SELECT now FROM t) OPERATOR(pg_catalog.-)
                                                 pg_catalog.min(r.expires_at)), 0) AS oldest
              FROM @extschema@.hc_reservations r
             WHERE r.status OPERATOR(pg_catalog.=) 'HELD'
               AND r.expires_at OPERATOR(pg_catalog.<=) (SELECT now FROM t)) o
     CROSS JOIN LATERAL (VALUES ('count'::text, o.n), ('oldest_seconds', o.oldest)) m (label, value)
    UNION ALL
    SELECT 'stock', m.label, m.value
      FROM (SELECT pg_catalog.count(*)::pg_catalog.float8 AS products,
                   COALESCE(pg_catalog.sum(i.stock), 0)::pg_catalog.float8 AS stock,
                   COALESCE(pg_catalog.sum(i.reserved), 0)::pg_catalog.float8 AS reserved,
                   (pg_catalog.count(*) FILTER (WHERE i.stock OPERATOR(pg_catalog.=) i.reserved))::pg_catalog.float8 AS sold_out
              FROM @extschema@.hc_inventory i) o
     CROSS JOIN LATERAL (VALUES ('products'::text, o.products), ('stock_units', o.stock),
                                ('reserved_units', o.reserved),
                                ('available_units', o.stock OPERATOR(pg_catalog.-) o.reserved),
                                ('sold_out_products', o.sold_out)) m (label, value)
    UNION ALL
    SELECT 'stock_overdue', m.label, m.value
      FROM (SELECT pg_catalog.count(*)::pg_catalog.float8 AS n,
                   COALESCE(pg_catalog.sum(l.qty), 0)::pg_catalog.float8 AS units,
                   COALESCE(pg_catalog.date_part('epoch', (SELECT now FROM t) OPERATOR(pg_catalog.-)
                                                 pg_catalog.min(l.expires_at)), 0) AS oldest
              FROM @extschema@.hc_stock_reservation_lines l
             WHERE l.status OPERATOR(pg_catalog.=) 'RESERVED'
               AND l.expires_at OPERATOR(pg_catalog.<=) (SELECT now FROM t)) o
     CROSS JOIN LATERAL (VALUES ('count'::text, o.n), ('units', o.units),
                                ('oldest_seconds', o.oldest)) m (label, value)
    UNION ALL
    SELECT 'leases', m.label, m.value
      FROM (SELECT (pg_catalog.count(*) FILTER (WHERE l.owner IS NOT NULL))::pg_catalog.float8 AS held,
                   (pg_catalog.count(*) FILTER (WHERE l.owner IS NOT NULL
                       AND l.heartbeat_at OPERATOR(pg_catalog.+) l.stale_after
                           OPERATOR(pg_catalog.<=) (SELECT now FROM t)))::pg_catalog.float8 AS stale
              FROM @extschema@.hc_locks l) o
     CROSS JOIN LATERAL (VALUES ('held'::text, o.held), ('stale', o.stale)) m (label, value)
    UNION ALL
    SELECT 'attempts', 'manual_review',
           (SELECT pg_catalog.count(*) FROM @extschema@.hc_attempts a
             WHERE a.status OPERATOR(pg_catalog.=) 'MANUAL_REVIEW')::pg_catalog.float8
    UNION ALL
    SELECT 'sweeper', m.label, m.value
      FROM (SELECT COALESCE(pg_catalog.date_part('epoch', (SELECT now FROM t) OPERATOR(pg_catalog.-)
                                                 pg_catalog.max(s.last_end)), -1) AS since,
                   COALESCE(pg_catalog.sum(s.expired_holds), 0)::pg_catalog.float8 AS holds,
                   COALESCE(pg_catalog.sum(s.expired_reservations), 0)::pg_catalog.float8 AS reservations,
                   (pg_catalog.count(*) FILTER (WHERE s.last_error_at OPERATOR(pg_catalog.>=) s.last_start))::pg_catalog.float8 AS failing
              FROM @extschema@.hc_sweeper_status s) o
     CROSS JOIN LATERAL (VALUES ('seconds_since_last_run'::text, o.since),
                                ('last_expired_holds', o.holds),
                                ('last_expired_reservations', o.reservations),
                                ('failing', o.failing)) m (label, value)
    UNION ALL
    SELECT 'stock_spread', m.label, m.value
      FROM (SELECT (pg_catalog.count(*) FILTER (WHERE n.parts OPERATOR(pg_catalog.>) COALESCE(x.min_parts, 1)))::pg_catalog.float8 AS spread,
                   COALESCE(pg_catalog.sum(n.parts OPERATOR(pg_catalog.-) COALESCE(x.min_parts, 1))
                            FILTER (WHERE n.parts OPERATOR(pg_catalog.>) COALESCE(x.min_parts, 1)), 0)::pg_catalog.float8 AS extra,
                   COALESCE(pg_catalog.sum(x.spreads), 0)::pg_catalog.float8 AS spreads,
                   COALESCE(pg_catalog.sum(x.gathers), 0)::pg_catalog.float8 AS gathers,
                   COALESCE(pg_catalog.sum(x.failures), 0)::pg_catalog.float8 AS failures,
                   COALESCE(pg_catalog.date_part('epoch', (SELECT now FROM t) OPERATOR(pg_catalog.-)
                                                 pg_catalog.max(x.last_spread_at)), -1) AS since_spread,
                   COALESCE(pg_catalog.date_part('epoch', (SELECT now FROM t) OPERATOR(pg_catalog.-)
                                                 pg_catalog.max(x.last_gather_at)), -1) AS since_gather,
                   COALESCE((SELECT y.last_waiters FROM @extschema@.hc_stock_spreads y
                              WHERE y.last_spread_at IS NOT NULL
                              ORDER BY y.last_spread_at DESC NULLS LAST LIMIT 1), 0)::pg_catalog.float8 AS waiters,
                   COALESCE((SELECT y.last_stall_ms FROM @extschema@.hc_stock_spreads y
                              WHERE y.last_stall_ms IS NOT NULL
                              ORDER BY GREATEST(y.last_spread_at, y.last_gather_at, y.last_failure_at) DESC NULLS LAST
                              LIMIT 1), 0) AS last_stall,
                   COALESCE(pg_catalog.max(x.max_stall_ms), 0) AS max_stall
              FROM (SELECT p.product_id, pg_catalog.count(*) AS parts
                      FROM @extschema@.hc_stock_parts p GROUP BY p.product_id) n
              FULL JOIN @extschema@.hc_stock_spreads x ON x.product_id OPERATOR(pg_catalog.=) n.product_id) o
     CROSS JOIN LATERAL (VALUES ('spread_products'::text, o.spread), ('extra_parts', o.extra),
                                ('automatic_spreads', o.spreads), ('automatic_gathers', o.gathers),
                                ('failed_runs', o.failures),
                                ('seconds_since_last_spread', o.since_spread),
                                ('seconds_since_last_gather', o.since_gather),
                                ('last_spread_waiters', o.waiters),
                                ('last_stall_ms', o.last_stall), ('max_stall_ms', o.max_stall)) m (label, value);
COMMENT ON VIEW @extschema@.hc_overview IS
    'For operators: assets by status, holds and stock reservations active and expiring, leases held and stale, attempts awaiting manual review, ledger events of the last hour, the automatic spreads of hot products.';
COMMENT ON VIEW @extschema@.hc_metrics IS
    'For monitoring: one figure per row (metric, label, value), counts and ages only, for postgres_exporter.';
